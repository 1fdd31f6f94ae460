"""Integrations of the client with agent frameworks, one module each; each needs its
framework installed (an extra of ``context-lanes-client``, e.g. ``[mini-swe-agent]``)."""
