"""The web process: the Flask app served by uvicorn (`python -m omniroute.serve`).

The MCP server's streamable HTTP app answers /mcp (and its OAuth metadata); every other path
goes straight to Flask, which runs behind a2wsgi's WSGI-to-ASGI bridge on a pool of threads, so
streamed responses reach clients chunk by chunk. Only MCP's paths pass MCP's bearer check: a
/v1 or /api request's token is checked once, by Flask.
"""

from __future__ import annotations

import uvicorn
from a2wsgi import WSGIMiddleware
from flask import Flask
from starlette.applications import Starlette
from starlette.types import ASGIApp, Receive, Scope, Send

from .factory import create_app
from .mcp.auth import ClientAddress
from .mcp.server import build_server


class PathDispatch:
    """ASGI: the MCP app's own paths (with or without a trailing slash) and the lifespan go to
    it, every other request to Flask. Not a Starlette Mount: its pattern does not match a path
    with a newline in it, and its middleware (MCP's bearer check) would run for every path."""

    def __init__(self, mcp: Starlette, flask: ASGIApp) -> None:
        self.mcp = mcp
        self.flask = flask
        self.mcp_paths = frozenset(
            path for route in mcp.routes for path in (route.path, route.path + "/")
        )

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "lifespan" or scope.get("path") in self.mcp_paths:
            await self.mcp(scope, receive, send)
        else:
            await self.flask(scope, receive, send)


def asgi_app(app: Flask) -> PathDispatch:
    """MCP's streamable HTTP app at /mcp, with every Flask route beside it."""
    base_url = f"http://{app.config['HOST']}:{app.config['PORT']}"
    server = build_server(app.extensions["omniroute"], app.config, base_url=base_url)
    mcp = server.streamable_http_app(streamable_http_path="/mcp", host=app.config["HOST"])
    mcp.add_middleware(ClientAddress)  # the MCP token check's brake needs the address
    return PathDispatch(mcp, WSGIMiddleware(app, workers=app.config["WEB_THREADS"]))


def proxy_options(config) -> dict:
    """uvicorn believes proxy headers only from the proxies FORWARDED_ALLOW_IPS names."""
    trusted = config["FORWARDED_ALLOW_IPS"]
    return {"proxy_headers": trusted is not None, "forwarded_allow_ips": trusted or ""}


def main() -> None:
    app = create_app()
    uvicorn.run(
        asgi_app(app),
        host=app.config["HOST"],
        port=app.config["PORT"],
        log_level=app.config["LOG_LEVEL"].lower(),
        # uvicorn's lines go through the app's handler (plain or JSON, with request ids);
        # its access line gives way to the app's own request line, which says more.
        log_config=None,
        access_log=False,
        **proxy_options(app.config),
    )


if __name__ == "__main__":
    main()
