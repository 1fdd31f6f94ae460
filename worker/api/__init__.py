"""The HTTP API (``create_app`` in :mod:`worker.api.app`, ``lanes api`` in :mod:`worker.api.main`)
and the inspector page it serves (``static/``). Its request and response bodies are the
client's (:mod:`lanes_client.schemas`)."""
