"""/v1/chat/completions with memory, and /v1/models (the blueprint: blueprint.py)."""

from __future__ import annotations

from typing import Any

from flask.views import MethodView

from omniroute.proxy.blueprint import GATEWAY_SECURITY, bad_field, blp, body_with_model
from omniroute.proxy.conversation import last_user_text
from omniroute.proxy.forward import CHAT, forward_with_memory
from omniroute.proxy.schemas import (
    ChatCompletionSchema,
    ChatRequestSchema,
    ModelListSchema,
    relayed_answer,
    request_body,
)
from omniroute.services import services

COMPLETION_RESPONSE = relayed_answer(
    "The provider's chat completion (OpenAI format), or its server-sent events when "
    "`stream` is true.",
    ChatCompletionSchema,
)


def _read_body() -> dict[str, Any]:
    body = body_with_model()
    messages = body.get("messages")
    if not isinstance(messages, list) or not messages:
        bad_field("messages", "messages is required: a non-empty list of messages.")
    if not all(isinstance(m, dict) and _named(m.get("role")) for m in messages):
        bad_field("messages", "Every message must be an object with a role.")
    choices = body.get("n")
    if choices is not None and (
        not isinstance(choices, int) or isinstance(choices, bool) or choices < 1
    ):
        bad_field("n", "n must be a whole number of choices, 1 or more.")
    return body


def _named(role) -> bool:
    return isinstance(role, str) and bool(role.strip())


@blp.route("/chat/completions")
class ChatCompletions(MethodView):
    @blp.doc(
        security=GATEWAY_SECURITY,
        requestBody=request_body(ChatRequestSchema),
        responses=COMPLETION_RESPONSE,
    )
    def post(self):
        """Create a chat completion (OpenAI format), with memory

        The model is `provider/model`, or a bare model of the default provider. With memory
        enabled, relevant memories of the key are injected and new facts are extracted from
        the exchange afterwards; `x-omniroute-no-memory: true` turns both off for a request
        and `x-omniroute-session-id` names the session. Streams as server-sent events when
        `stream` is true.
        """
        body = _read_body()
        return forward_with_memory(body, last_user_text(body["messages"]), CHAT)


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
