"""The OpenAPI shapes of /v1: the fields the gateway reads in a request, and those of the
answers it relays or makes (OpenAI's format; every other field passes through as sent).

Requests are checked by the routes themselves (an OpenAI-style 400 naming the field); these
schemas document them for /docs and generated clients. Answers from a provider are relayed
byte for byte, so their schemas list what OpenAI's format promises, not what we add.
"""

from __future__ import annotations

import marshmallow as ma
from marshmallow.validate import Length, Range

from omniroute.core.fields import not_blank

ANY_CONTENT = "A string, or a list of content parts such as {type: text, text}."
# One server-sent event, as a client reads it: `data` holds a JSON object (or `[DONE]`, the
# end of a chat stream); the Responses API names each event in `event` too.
SSE_EVENT = {
    "type": "object",
    "required": ["data"],
    "properties": {
        "event": {"type": "string", "description": "response.created, ... (Responses API)"},
        "data": {"type": "string", "description": "A JSON object, or [DONE] at a chat's end."},
        "id": {"type": "string"},
        "retry": {"type": "integer"},
    },
}
SSE = {"text/event-stream": {"schema": SSE_EVENT}}


class OpenSchema(ma.Schema):
    """OpenAI's objects carry more fields than these; they pass through unchanged."""

    class Meta:
        unknown = ma.INCLUDE


class MessageSchema(OpenSchema):
    role = ma.fields.String(
        required=True,
        validate=not_blank,
        metadata={"description": "system, developer, user, assistant or tool"},
    )
    content = ma.fields.Raw(allow_none=True, metadata={"description": ANY_CONTENT})


class ChatRequestSchema(OpenSchema):
    model = ma.fields.String(
        required=True,
        validate=not_blank,
        metadata={"description": "`provider/model`, or a bare model of the default provider"},
    )
    messages = ma.fields.List(
        ma.fields.Nested(MessageSchema), required=True, validate=Length(min=1)
    )
    stream = ma.fields.Boolean(
        allow_none=True, metadata={"description": "Answer as server-sent events (true or false)."}
    )
    n = ma.fields.Integer(
        strict=True,
        allow_none=True,
        validate=Range(min=1),
        metadata={"description": "Choices to make; memory reads choice 0."},
    )


class UsageSchema(OpenSchema):
    prompt_tokens = ma.fields.Integer()
    completion_tokens = ma.fields.Integer()
    total_tokens = ma.fields.Integer()


class ChoiceSchema(OpenSchema):
    index = ma.fields.Integer()
    message = ma.fields.Nested(MessageSchema)
    finish_reason = ma.fields.String(allow_none=True)


class ChatCompletionSchema(OpenSchema):
    id = ma.fields.String()
    object = ma.fields.String(metadata={"description": "chat.completion"})
    created = ma.fields.Integer()
    model = ma.fields.String()
    choices = ma.fields.List(ma.fields.Nested(ChoiceSchema))
    usage = ma.fields.Nested(UsageSchema)


def _model() -> ma.fields.String:
    return ma.fields.String(
        required=True, validate=not_blank, metadata={"description": "`provider/model`"}
    )


def _input(description: str, items: dict) -> ma.fields.Raw:
    """A required `input`: a non-empty string, or a non-empty list of `items`."""
    return ma.fields.Raw(
        required=True,
        metadata={
            "description": description,
            "anyOf": [
                {"type": "string", "minLength": 1},
                {"type": "array", "minItems": 1, "items": items},
            ],
        },
    )


class ResponseRequestSchema(OpenSchema):
    model = _model()
    input = _input("A string, or a list of input items (messages and others).", {"type": "object"})
    instructions = ma.fields.String(
        allow_none=True, metadata={"description": "Left as sent: memory goes into input."}
    )
    stream = ma.fields.Boolean(
        allow_none=True, metadata={"description": "Answer as server-sent events (true or false)."}
    )


class ResponseObjectSchema(OpenSchema):
    id = ma.fields.String()
    object = ma.fields.String(metadata={"description": "response"})
    created_at = ma.fields.Integer()
    status = ma.fields.String(metadata={"description": "completed, failed, incomplete, ..."})
    model = ma.fields.String()
    output = ma.fields.List(
        ma.fields.Dict(),
        metadata={
            "description": "Output items: messages (content parts of type output_text) and others."
        },
    )
    usage = ma.fields.Dict()


class ModelSchema(ma.Schema):
    id = ma.fields.String(metadata={"description": "provider/model"})
    object = ma.fields.String()
    created = ma.fields.Integer()
    owned_by = ma.fields.String()


class ModelListSchema(ma.Schema):
    object = ma.fields.String()
    data = ma.fields.List(ma.fields.Nested(ModelSchema))


class EmbeddingRequestSchema(OpenSchema):
    model = _model()
    input = _input(
        "A string, or a list of strings (or of token arrays).",
        {
            "anyOf": [
                {"type": "string"},
                {"type": "integer"},
                {"type": "array", "minItems": 1, "items": {"type": "integer"}},
            ]
        },
    )


def request_body(schema: type[ma.Schema]) -> dict:
    return {"required": True, "content": {"application/json": {"schema": schema}}}


def relayed_answer(description: str, schema: type[ma.Schema]) -> dict:
    return {
        "200": {
            "description": description,
            "content": {"application/json": {"schema": schema}, **SSE},
        }
    }
