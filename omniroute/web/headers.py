"""Security headers on every response, pages, docs and JSON alike.

No page of ours may be framed or sniffed, and none runs inline script: the studio, the status
page and the API docs (whose Swagger UI starts from static/swagger-init.js) all load scripts
from this origin only. Swagger UI sets style attributes as it renders, so /docs alone allows
inline style.
"""

from __future__ import annotations

from flask import Flask, request

CONTENT_SECURITY_POLICY = (
    "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
    "connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'; "
    "object-src 'none'"
)
DOCS_POLICY = CONTENT_SECURITY_POLICY.replace(
    "style-src 'self'", "style-src 'self' 'unsafe-inline'"
)
DOCS_ENDPOINT = "api-docs.openapi_swagger_ui"


def _secure(response):
    policy = DOCS_POLICY if request.endpoint == DOCS_ENDPOINT else CONTENT_SECURITY_POLICY
    response.headers.setdefault("Content-Security-Policy", policy)
    response.headers.setdefault("X-Frame-Options", "DENY")
    response.headers.setdefault("X-Content-Type-Options", "nosniff")
    response.headers.setdefault("Referrer-Policy", "same-origin")
    return response


def init_app(app: Flask) -> None:
    app.after_request(_secure)
