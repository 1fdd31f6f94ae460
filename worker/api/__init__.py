"""The HTTP API (``create_app`` in :mod:`worker.api.app`, ``lanes api`` in :mod:`worker.api.main`).

Kept import-light: the Python client imports :mod:`worker.api.schemas` without FastAPI's app.
"""
