"""The web process: the Flask app served by uvicorn (`python -m omniroute.serve`).

Flask runs behind a2wsgi's WSGI-to-ASGI bridge on a pool of threads, so streamed responses
reach clients chunk by chunk and ASGI apps (the MCP server) can later share the port.
"""

from __future__ import annotations

import uvicorn
from a2wsgi import WSGIMiddleware
from flask import Flask

from . import create_app


def asgi_app(app: Flask) -> WSGIMiddleware:
    return WSGIMiddleware(app, workers=app.config["WEB_THREADS"])


def main() -> None:
    app = create_app()
    uvicorn.run(
        asgi_app(app),
        host=app.config["HOST"],
        port=app.config["PORT"],
        log_level=app.config["LOG_LEVEL"].lower(),
        proxy_headers=False,
    )


if __name__ == "__main__":
    main()
