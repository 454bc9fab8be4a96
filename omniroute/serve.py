"""The web process: the Flask app served by uvicorn (`python -m omniroute.serve`).

The MCP server's streamable HTTP app answers /mcp (and its OAuth metadata); every other path
goes to Flask, which runs behind a2wsgi's WSGI-to-ASGI bridge on a pool of WEB_THREADS
threads; the probes have two threads of their own. A chat holds a thread only until its
memories are in the body: the chat front (proxy/front.py) relays the provider's answer on the
event loop, so one process holds MAX_OPEN_STREAMS streams. Only MCP's paths pass MCP's bearer
check: a /v1 or /api request's token is checked once, by Flask.
"""

from __future__ import annotations

import anyio
import uvicorn
from a2wsgi import WSGIMiddleware
from flask import Flask
from starlette.applications import Starlette
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from omniroute.factory import app_or_exit
from omniroute.mcp.auth import ClientAddress
from omniroute.mcp.server import build_server
from omniroute.proxy.front import ChatFront, error_message, send_whole
from omniroute.proxy.streams import OpenStreams

# Probes and the scrape answer on threads of their own: never queued behind chats.
PROBE_PATHS = frozenset({"/healthz", "/readyz", "/metrics"})
PROBE_THREADS = 2
# What uvicorn waits past the streams' grace for the last writes (extraction) before it
# cancels what is left.
SHUTDOWN_MARGIN_SECONDS = 3.0


class PathDispatch:
    """ASGI: the MCP app's own paths (with or without a trailing slash) and the lifespan go to
    it, the probes to their own threads, every other request to Flask through the chat front.
    Not a Starlette Mount: its pattern does not match a path with a newline in it, and its
    middleware (MCP's bearer check) would run for every path."""

    def __init__(self, mcp: Starlette, flask: ChatFront, probes: ASGIApp) -> None:
        self.mcp = mcp
        self.flask = flask
        self.probes = probes
        self.mcp_paths = frozenset(
            path for route in mcp.routes for path in (route.path, route.path + "/")
        )

    @property
    def streams(self) -> OpenStreams:
        return self.flask.streams

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        path = scope.get("path")
        if scope["type"] == "lifespan" or path in self.mcp_paths:
            await self.mcp(scope, receive, send)
        elif path in PROBE_PATHS:
            await self.probes(scope, receive, send)
        else:
            await self.flask(scope, receive, send)


class WholeBodies:
    """ASGI: a body sent without Content-Length (`Transfer-Encoding: chunked`) is read whole
    first, up to the largest limit (MAX_CHAT_BODY_BYTES: past it 413 at once), and passed on
    with its length. Flask then reads it, and applies each route's own limit, as it does any
    body; without this, Werkzeug reads a body of no length as empty."""

    def __init__(self, app: ASGIApp, max_bytes: int) -> None:
        self.app = app
        self.max_bytes = max_bytes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        names = {name for name, _ in scope.get("headers", ())}
        if (
            scope["type"] != "http"
            or b"content-length" in names
            or b"transfer-encoding" not in names
        ):
            await self.app(scope, receive, send)
            return
        body = bytearray()
        more = True
        while more:
            message = await receive()
            if message["type"] == "http.disconnect":
                return
            body += message.get("body", b"")
            more = message.get("more_body", False)
            if len(body) > self.max_bytes:
                message = f"The body is larger than {self.max_bytes} bytes."
                await send_whole(send, 413, [], error_message(413, message))
                return
        headers = [(k, v) for k, v in scope["headers"] if k != b"transfer-encoding"]
        headers.append((b"content-length", str(len(body)).encode()))
        replayed = False

        async def replay() -> Message:
            nonlocal replayed
            if replayed:
                return await receive()
            replayed = True
            return {"type": "http.request", "body": bytes(body), "more_body": False}

        await self.app({**scope, "headers": headers}, replay, send)


def asgi_app(app: Flask) -> PathDispatch:
    """MCP's streamable HTTP app at /mcp, with every Flask route beside it."""
    base_url = f"http://{app.config['HOST']}:{app.config['PORT']}"
    svc = app.extensions["omniroute"]
    server = build_server(svc, app.config, base_url=base_url)
    mcp = server.streamable_http_app(streamable_http_path="/mcp", host=app.config["HOST"])
    mcp.add_middleware(ClientAddress)  # the MCP token check's brake needs the address
    streams = OpenStreams(app.config["MAX_OPEN_STREAMS"], svc.activity)
    flask = WSGIMiddleware(app, workers=app.config["WEB_THREADS"])
    chats = ChatFront(WholeBodies(flask, app.config["MAX_CHAT_BODY_BYTES"]), streams)
    return PathDispatch(mcp, chats, WSGIMiddleware(app, workers=PROBE_THREADS))


class GatewayServer(uvicorn.Server):
    """uvicorn, whose shutdown (SIGTERM) drains the chat front: no new chats, open ones go on
    for SHUTDOWN_GRACE_SECONDS and are then ended cleanly; the provider client closes last."""

    def __init__(self, app: Flask, **options) -> None:
        self.flask_app = app
        self.dispatch = asgi_app(app)
        grace = app.config["SHUTDOWN_GRACE_SECONDS"]
        super().__init__(
            uvicorn.Config(
                self.dispatch,
                timeout_graceful_shutdown=grace + SHUTDOWN_MARGIN_SECONDS,
                **options,
            )
        )

    async def shutdown(self, sockets=None) -> None:
        self.dispatch.streams.drain(self.flask_app.config["SHUTDOWN_GRACE_SECONDS"])
        await super().shutdown(sockets)
        svc = self.flask_app.extensions["omniroute"]
        await svc.provider_client.aclose()
        # uvicorn re-raises SIGTERM once it is done, which ends the process at once: the jobs
        # the last answers queued (extraction, in-process without Redis) run before that.
        await anyio.to_thread.run_sync(self._settle, svc)

    @staticmethod
    def _settle(svc) -> None:
        svc.jobs.wait(SHUTDOWN_MARGIN_SECONDS)
        svc.access.flush()
        svc.activity.flush()


def proxy_options(config) -> dict:
    """uvicorn believes proxy headers only from the proxies FORWARDED_ALLOW_IPS names."""
    trusted = config["FORWARDED_ALLOW_IPS"]
    return {"proxy_headers": trusted is not None, "forwarded_allow_ips": trusted or ""}


def main() -> None:
    app = app_or_exit()
    server = GatewayServer(
        app,
        host=app.config["HOST"],
        port=app.config["PORT"],
        log_level=app.config["LOG_LEVEL"].lower(),
        # uvicorn's lines go through the app's handler (plain or JSON, with request ids);
        # its access line gives way to the app's own request line, which says more.
        log_config=None,
        access_log=False,
        **proxy_options(app.config),
    )
    server.run()
    # Stopped: the jobs already accepted (extraction in-process) finish, counts are written.
    app.extensions["omniroute"].close()


if __name__ == "__main__":
    main()
