"""The /v1 blueprint: the OpenAI-compatible endpoints, each authenticated by a gateway key
(routes.py: chat with memory; passthrough.py: embeddings and models, without)."""

from __future__ import annotations

from flask import current_app, g, request
from flask_smorest import Blueprint, abort

from omniroute.web.auth import bearer_token, gateway_key

blp = Blueprint("gateway", __name__, url_prefix="/v1", description="OpenAI-compatible gateway")
GATEWAY_SECURITY = [{"gatewayKey": []}]


@blp.before_request
def _authenticate() -> None:
    request.max_content_length = current_app.config["MAX_CHAT_BODY_BYTES"]
    token = bearer_token()
    key = gateway_key(token) if token else None
    if key is None:
        abort(
            401,
            message="Invalid or missing API key: send 'Authorization: Bearer sk-omr-...'.",
            code="invalid_api_key",
        )
    g.api_key = key


def bad_field(field: str, message: str):
    abort(400, message=message, errors={"json": {field: [message]}})


def unknown_model(exc: Exception):
    """A model no provider serves: OpenAI's 404 `model_not_found` (the SDK's NotFoundError)."""
    message = str(exc)
    abort(404, message=message, code="model_not_found", errors={"json": {"model": [message]}})


def body_with_model() -> dict:
    """The request's JSON object, which must name a model and may say `stream` as a boolean
    (a 400 naming the field if not: a provider would read "yes" as true, and we as false)."""
    body = request.get_json(silent=True)
    if not isinstance(body, dict):
        bad_field("body", "The body must be a JSON object.")
    if not isinstance(body.get("model"), str) or not body["model"].strip():
        bad_field("model", "model is required: a string such as 'provider/model'.")
    if body.get("stream") is not None and not isinstance(body["stream"], bool):
        bad_field("stream", "stream must be true or false.")
    return body
