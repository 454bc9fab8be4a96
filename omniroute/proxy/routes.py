"""/v1/chat/completions with memory, and /v1/models (the blueprint: blueprint.py)."""

from __future__ import annotations

import json
from typing import Any

import marshmallow as ma
from flask import Response, g, request, stream_with_context
from flask.views import MethodView
from flask_smorest import abort

from ..providers.registry import UnknownProvider, resolve_model
from ..services import services
from .blueprint import GATEWAY_SECURITY, bad_field, blp
from .conversation import StreamedReply, reply_text
from .pipeline import MemoryTurn
from .upstream import UpstreamFailure, open_upstream, refusal, relayed_headers

INJECTED_HEADER = "x-omniroute-memories"
# The completion is the provider's own body, relayed as it comes.
COMPLETION_RESPONSE = {
    "200": {
        "description": "The provider's chat completion (OpenAI format), or its server-sent "
        "events when `stream` is true.",
        "content": {
            "application/json": {"schema": {"type": "object"}},
            "text/event-stream": {"schema": {"type": "string"}},
        },
    }
}


class ModelSchema(ma.Schema):
    id = ma.fields.String(metadata={"description": "provider/model"})
    object = ma.fields.String()
    created = ma.fields.Integer()
    owned_by = ma.fields.String()


class ModelListSchema(ma.Schema):
    object = ma.fields.String()
    data = ma.fields.List(ma.fields.Nested(ModelSchema))


def _read_body() -> dict[str, Any]:
    body = request.get_json(silent=True)
    if not isinstance(body, dict):
        bad_field("body", "The body must be a JSON object.")
    if not isinstance(body.get("model"), str) or not body["model"].strip():
        bad_field("model", "model is required: a string such as 'provider/model'.")
    messages = body.get("messages")
    if not isinstance(messages, list) or not messages:
        bad_field("messages", "messages is required: a non-empty list of messages.")
    if not all(isinstance(m, dict) and isinstance(m.get("role"), str) for m in messages):
        bad_field("messages", "Every message must be an object with a role.")
    return body


@blp.route("/chat/completions")
class ChatCompletions(MethodView):
    @blp.doc(security=GATEWAY_SECURITY, responses=COMPLETION_RESPONSE)
    def post(self):
        """Create a chat completion (OpenAI format), with memory

        The model is `provider/model`, or a bare model of the default provider. With memory
        enabled, relevant memories of the key are injected and new facts are extracted from
        the exchange afterwards; `x-omniroute-no-memory: true` turns both off for a request
        and `x-omniroute-session-id` names the session. Streams as server-sent events when
        `stream` is true.
        """
        svc = services()
        body = _read_body()
        try:
            provider, model = resolve_model(svc.providers, body["model"])
        except UnknownProvider as exc:
            bad_field("model", str(exc))
        turn = MemoryTurn.begin(svc, request, g.api_key.id, body)
        forwarded = turn.apply(svc, {**body, "model": model}, provider, model)
        try:
            upstream = open_upstream(svc.provider_client, provider, "/chat/completions", forwarded)
        except UpstreamFailure as exc:
            abort(exc.status, message=exc.message, code="upstream_unavailable")
        headers = {INJECTED_HEADER: str(len(turn.injected)), **relayed_headers(upstream)}
        refused = refusal(provider, upstream, headers)
        if refused is not None:
            return refused
        if body.get("stream") is True:
            return Response(
                stream_with_context(_relay(upstream, turn)),
                upstream.status_code,
                {**headers, "Cache-Control": "no-cache", "X-Accel-Buffering": "no"},
                mimetype="text/event-stream",
            )
        try:
            raw = upstream.read()
        finally:
            upstream.close()
        if upstream.status_code == 200:
            try:
                turn.finish(svc, reply_text(json.loads(raw)))
            except ValueError:
                pass
        content_type = upstream.headers.get("content-type", "application/json")
        return Response(raw, upstream.status_code, headers, content_type=content_type)


def _relay(upstream, turn: MemoryTurn):
    """Pass the upstream's SSE bytes on as they arrive; extract once the stream is whole."""
    svc = services()
    reply = StreamedReply()
    try:
        for chunk in upstream.iter_raw():
            reply.feed(chunk)
            yield chunk
    except Exception as exc:  # the client already has a 200: report in-band, then stop
        message = {"error": {"message": f"The upstream stream broke: {type(exc).__name__}."}}
        yield f"data: {json.dumps(message)}\n\n".encode()
        return
    finally:
        upstream.close()
    if upstream.status_code == 200:
        turn.finish(svc, reply.text)


@blp.route("/models")
class Models(MethodView):
    @blp.doc(security=GATEWAY_SECURITY)
    @blp.response(200, ModelListSchema)
    def get(self):
        """List every provider's models as `provider/model` (OpenAI format)"""
        models = [
            model_entry(provider, model)
            for provider in services().providers.list_providers()
            for model in provider.models
        ]
        return {"object": "list", "data": models}


def model_entry(provider, model: str) -> dict:
    """A model as OpenAI describes one, named `provider/model`."""
    return {
        "id": f"{provider.id}/{model}",
        "object": "model",
        "created": 0,
        "owned_by": provider.id,
    }
