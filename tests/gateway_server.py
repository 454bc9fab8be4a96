"""Serve an app on loopback the way production does (GatewayServer: uvicorn, a2wsgi and the
chat front): in a thread of the test's process, or as a `python -m omniroute.serve` process of
its own."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from contextlib import contextmanager
from pathlib import Path

import pytest
from flask import Flask

from omniroute.serve import GatewayServer, proxy_options
from tests.helpers import environment, free_port

ROOT = Path(__file__).resolve().parent.parent


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


def call(url: str, method: str = "GET", body: dict | None = None, token: str | None = None):
    request = urllib.request.Request(url, method=method)
    if body is not None:
        request.data = json.dumps(body).encode()
        request.add_header("Content-Type", "application/json")
    if token:
        request.add_header("Authorization", f"Bearer {token}")
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            return response.status, dict(response.headers), json.loads(response.read() or b"null")
    except urllib.error.HTTPError as error:
        return error.code, dict(error.headers), json.loads(error.read() or b"null")


@contextmanager
def web_process(log_path: Path, **settings: str):
    """`python -m omniroute.serve` on a free port until the block ends; yields (url, log)."""
    port = free_port()
    log = log_path.open("w+")
    process = subprocess.Popen(
        [sys.executable, "-m", "omniroute.serve"],
        cwd=ROOT,
        env=environment(PORT=str(port), **settings),
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    base = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        try:
            call(f"{base}/healthz")
            break
        except OSError:
            assert process.poll() is None, "the server exited"
            time.sleep(0.1)
    else:
        process.kill()
        pytest.fail("the server did not answer within 30 s")
    try:
        yield base, log
        process.terminate()
        # uvicorn shuts down gracefully, then re-raises SIGTERM as its exit status.
        assert process.wait(timeout=15) in (0, -15)
        log.seek(0)
        assert "Finished server process" in log.read()
    finally:
        if process.poll() is None:
            process.kill()
        log.close()
