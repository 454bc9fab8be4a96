"""Serve an app on loopback the way production does (GatewayServer: uvicorn, a2wsgi and the
chat front), in a thread."""

from __future__ import annotations

import threading
import time

from flask import Flask

from omniroute.serve import GatewayServer, proxy_options


class RunningGateway:
    def __init__(self, app: Flask) -> None:
        self.server = GatewayServer(
            app, host="127.0.0.1", port=0, log_level="warning", **proxy_options(app.config)
        )
        self.thread = threading.Thread(target=self.server.run, daemon=True)

    def start(self) -> RunningGateway:
        self.thread.start()
        deadline = time.monotonic() + 10
        while not self.server.started:
            if time.monotonic() > deadline:
                raise RuntimeError("the gateway did not start")
            time.sleep(0.01)
        return self

    @property
    def url(self) -> str:
        port = self.server.servers[0].sockets[0].getsockname()[1]
        return f"http://127.0.0.1:{port}"

    def stop(self) -> None:
        self.server.should_exit = True
        self.thread.join(timeout=10)
