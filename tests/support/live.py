"""A real uvicorn server for an app, in a thread of the test process (one lifespan)."""

from __future__ import annotations

import threading
import time

import uvicorn
from fastapi import FastAPI

from tests.support.server import free_port


class LiveServer:
    def __init__(self, app: FastAPI):
        self.app = app
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=self.port, log_level="warning",
                                                    lifespan="on"))
        self.thread = threading.Thread(target=self.server.run, daemon=True)

    def __enter__(self) -> "LiveServer":
        self.thread.start()
        deadline = time.monotonic() + 60
        while not self.server.started:
            if time.monotonic() > deadline or not self.thread.is_alive():
                raise RuntimeError("server did not start")
            time.sleep(0.05)
        return self

    def __exit__(self, *exc) -> None:  # noqa: ANN002
        self.server.should_exit = True
        self.thread.join(30)
