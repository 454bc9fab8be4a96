"""The web process: the Flask app served by uvicorn (`python -m omniroute.serve`).

The MCP server's streamable HTTP app answers /mcp; every other path goes to Flask, which runs
behind a2wsgi's WSGI-to-ASGI bridge on a pool of threads, so streamed responses reach clients
chunk by chunk.
"""

from __future__ import annotations

import uvicorn
from a2wsgi import WSGIMiddleware
from flask import Flask
from starlette.applications import Starlette

from .factory import create_app
from .mcp.auth import ClientAddress
from .mcp.server import build_server


def asgi_app(app: Flask) -> Starlette:
    """MCP's streamable HTTP app at /mcp, with every Flask route beside it."""
    base_url = f"http://{app.config['HOST']}:{app.config['PORT']}"
    server = build_server(app.extensions["omniroute"], app.config, base_url=base_url)
    combined = server.streamable_http_app(streamable_http_path="/mcp", host=app.config["HOST"])
    # Flask answers whatever MCP does not: as the router's default, not a Mount("/"), whose
    # pattern does not match a path with a newline in it (Starlette answered those with a
    # plain-text 404 of its own).
    combined.router.default = WSGIMiddleware(app, workers=app.config["WEB_THREADS"])
    combined.add_middleware(ClientAddress)  # the MCP token check's brake needs the address
    return combined


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
