"""One JSON error shape for every 4xx and 5xx response.

{"error": {"message": str, "type": str, "details": [{"field": str, "message": str}]}}
"""

from __future__ import annotations

import logging
from collections.abc import Iterator, Mapping
from typing import Any, NoReturn

import marshmallow as ma
from flask import Flask, has_request_context, jsonify, request
from werkzeug.exceptions import (
    Conflict,
    HTTPException,
    InternalServerError,
    NotFound,
    ServiceUnavailable,
    UnprocessableEntity,
)

from omniroute.core.db import DatabaseBusy, is_busy, is_unavailable
from omniroute.core.text_rules import UnstorableText

log = logging.getLogger(__name__)

ERROR_TYPES = {
    400: "invalid_request_error",
    401: "authentication_error",
    403: "permission_error",
    404: "not_found_error",
    405: "invalid_request_error",
    409: "conflict_error",
    413: "request_too_large",
    415: "invalid_request_error",
    422: "invalid_request_error",
    429: "rate_limit_error",
    503: "service_unavailable",
}

BUSY_RETRY_AFTER_SECONDS = 1

# webargs reports errors that concern the whole body, not one field, under this name.
_WHOLE_BODY = "_schema"


class ErrorDetailSchema(ma.Schema):
    field = ma.fields.String(metadata={"description": "The input field at fault"})
    message = ma.fields.String()


class ErrorBodySchema(ma.Schema):
    """An upstream's own error (relayed on /v1) may carry more fields, such as `param`."""

    class Meta:
        unknown = ma.INCLUDE

    message = ma.fields.String()
    type = ma.fields.String()
    details = ma.fields.List(ma.fields.Nested(ErrorDetailSchema))
    code = ma.fields.String(
        allow_none=True, metadata={"description": "OpenAI's error code (/v1 answers only)"}
    )


class ErrorSchema(ma.Schema):
    error = ma.fields.Nested(ErrorBodySchema)


def error_type(status: int) -> str:
    return ERROR_TYPES.get(status, "server_error" if status >= 500 else "invalid_request_error")


def error_payload(
    status: int, message: str, details: list[dict[str, str]] | None = None
) -> dict[str, Any]:
    return {"error": {"message": message, "type": error_type(status), "details": details or []}}


def field_details(messages: Mapping[str, Any]) -> list[dict[str, str]]:
    """Flatten webargs/marshmallow messages, `{location: {field: [msg]}}`, to field details.

    Nested fields read as dotted paths ("metadata.source", "items.0.name"); errors about
    the body as a whole are reported for the field "body".
    """
    details = []
    for nested in messages.values():  # the outer level is the location: json, query...
        details.extend(_flatten(nested, ()))
    return details


def flat_messages(messages: Any) -> list[dict[str, str]]:
    """marshmallow's nested messages as `{field: "a.0.b", message}` items."""
    return list(_flatten(messages, ()))


def _flatten(messages: Any, path: tuple[str, ...]) -> Iterator[dict[str, str]]:
    if isinstance(messages, Mapping):
        for name, nested in messages.items():
            yield from _flatten(nested, path if name == _WHOLE_BODY else (*path, str(name)))
    elif isinstance(messages, list | tuple):
        for message in messages:
            yield from _flatten(message, path)
    else:
        yield {"field": ".".join(path) or "body", "message": str(messages)}


def abort_invalid(field: str, message: str) -> NoReturn:
    """Answer 422 naming the field (a dotted path for nested ones) and what is wrong with it."""
    _abort_naming(UnprocessableEntity(), field, message)


def abort_unknown(field: str, message: str) -> NoReturn:
    """Answer 404 naming the field whose value names something that does not exist (a key, a
    provider, a backend): well formed, but nothing to act on, as JSON:API answers a reference
    to a missing resource."""
    _abort_naming(NotFound(), field, message)


def abort_conflict(field: str, message: str) -> NoReturn:
    """Answer 409 naming the field whose value is fine alone but not with what is stored (a
    masked key sent with a new URL) or what is up (enabling a Qdrant that does not answer)."""
    _abort_naming(Conflict(), field, message)


def _abort_naming(error: HTTPException, field: str, message: str) -> NoReturn:
    error.data = {"errors": {"json": {field: [message]}}}
    raise error


def error_parts(error: HTTPException) -> tuple[int, str, list[dict[str, str]]]:
    """An HTTPException's status, message and field details, whichever shape renders them
    (ours, or mem0's on its routes)."""
    status = error.code or 500
    data = getattr(error, "data", None) or {}
    details = []
    if "errors" in data or "messages" in data:
        details = field_details(data.get("errors") or data.get("messages") or {})
    if data.get("message"):  # our own words, given with abort(...)
        message = data["message"]
    elif status >= 500:  # an unexpected failure: its details stay in the server log
        message = "Internal server error."
    elif details:
        message = _summary(SUMMARY_OPENINGS.get(status, "Invalid request"), details)
    else:
        message = error.description or error.name
    return status, message, details


def http_error_response(error: HTTPException):
    """Render any HTTPException (including webargs' 422 and abort(...)) in our shape."""
    status, message, details = error_parts(error)
    data = getattr(error, "data", None) or {}
    payload = error_payload(status, message, details)
    if "code" in data:  # OpenAI's error code, for /v1 clients
        payload["error"]["code"] = data["code"]
    response = jsonify(payload)
    response.status_code = status
    keep_error_headers(error, response)
    for name, value in (data.get("headers") or {}).items():
        response.headers[name] = value
    return response


def keep_error_headers(error: HTTPException, response) -> None:
    """Copy what the exception says about itself (Allow on 405, WWW-Authenticate on 401,
    Retry-After on 429) onto a response that renders it, whatever its content type."""
    for name, value in error.get_headers():
        if name.lower() != "content-type":
            response.headers[name] = value


# How a summary of field errors opens, when the status is not a plain invalid request.
SUMMARY_OPENINGS = {404: "Not found", 409: "Conflict"}


def _summary(opening: str, details: list[dict[str, str]]) -> str:
    parts = [
        d["message"] if d["field"] == "body" else f"{d['field']}: {d['message']}" for d in details
    ]
    return f"{opening}: " + "; ".join(parts)


def unexpected_error_response(error: Exception):
    """Log an unhandled exception with its traceback; the client sees no detail of it.

    A database that stayed locked past a write's wait is no server fault: 503, try again.
    """
    if isinstance(error, HTTPException):
        return http_error_response(error)
    if isinstance(error, UnstorableText):  # the edge stops bodies; this is what else got by
        try:
            abort_invalid(error.field, error.message)
        except HTTPException as invalid:
            return http_error_response(invalid)
    if isinstance(error, DatabaseBusy) or is_busy(error):
        log.warning("database busy: %s", error)
        return _unavailable(
            "The database is busy with other writes; try again shortly.", "database_busy"
        )
    if is_unavailable(error):
        log.warning("database unavailable: %s", error)
        return _unavailable(
            "The database is unavailable; try again shortly.", "database_unavailable"
        )
    log.exception("unhandled error", exc_info=error)
    return http_error_response(InternalServerError())


def _unavailable(message: str, code: str):
    """503 with Retry-After; on /v1 with OpenAI's `code` as well, which its clients read."""
    error = ServiceUnavailable(retry_after=BUSY_RETRY_AFTER_SECONDS)
    error.data = {"message": message}
    if has_request_context() and request.path.startswith("/v1/"):
        error.data["code"] = code
    return http_error_response(error)


def register_error_handlers(app: Flask) -> None:
    app.register_error_handler(HTTPException, http_error_response)
    app.register_error_handler(Exception, unexpected_error_response)
