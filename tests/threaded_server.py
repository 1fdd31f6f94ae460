"""An ASGI app served by uvicorn on a background thread, on a free loopback port.

Test doubles of OpenAI-compatible servers (scripted agent model, condenser) use it.
"""

from __future__ import annotations

import socket
import threading
import time

import uvicorn


class ThreadedServer:
    def __init__(self, app) -> None:
        sock = socket.socket()
        sock.bind(("127.0.0.1", 0))
        sock.listen(64)
        self.port = sock.getsockname()[1]
        config = uvicorn.Config(app, log_level="warning", lifespan="off", timeout_graceful_shutdown=1)
        self.server = uvicorn.Server(config)
        self.thread = threading.Thread(target=self.server.run, kwargs={"sockets": [sock]}, daemon=True)
        self.thread.start()
        while not self.server.started:
            time.sleep(0.01)

    @property
    def base_url(self) -> str:
        """The OpenAI ``base_url`` of the app."""
        return f"http://127.0.0.1:{self.port}/v1"

    def stop(self) -> None:
        self.server.should_exit = True
        self.thread.join(10)
