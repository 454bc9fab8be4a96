"""/v1/responses: the Responses API, with memory as chat has it (forward.py does the work).

Memory goes into `input` as a message of its own; the query and the text to extract are the
user's last message there (or `input` itself when it is a string), and the reply's text is
the answer's `output_text` or its assistant messages' text parts.
"""

from __future__ import annotations

from typing import Any

from flask.views import MethodView

from omniroute.proxy.blueprint import GATEWAY_SECURITY, bad_field, blp, body_with_model
from omniroute.proxy.conversation import input_user_text
from omniroute.proxy.forward import RESPONSES, forward_with_memory
from omniroute.proxy.schemas import (
    ResponseObjectSchema,
    ResponseRequestSchema,
    relayed_answer,
    request_body,
)

RESPONSE_RESPONSE = relayed_answer(
    "The provider's response object (OpenAI Responses format), or its server-sent events "
    "(`response.output_text.delta`, ..., `response.completed`) when `stream` is true.",
    ResponseObjectSchema,
)


def _read_body() -> dict[str, Any]:
    body = body_with_model()
    given = body.get("input")
    if isinstance(given, list):
        if not given or not all(isinstance(item, dict) for item in given):
            bad_field("input", "input must be a non-empty list of input items (objects).")
    elif not isinstance(given, str) or not given:
        bad_field("input", "input is required: a string or a list of input items.")
    if "instructions" in body and not isinstance(body["instructions"], str | None):
        bad_field("instructions", "instructions must be a string.")
    return body


@blp.route("/responses")
class Responses(MethodView):
    @blp.doc(
        security=GATEWAY_SECURITY,
        requestBody=request_body(ResponseRequestSchema),
        responses=RESPONSE_RESPONSE,
    )
    def post(self):
        """Create a model response (OpenAI Responses API), with memory

        As chat completions: the model is `provider/model`; relevant memories of the key go
        into `input` as a message of their own (`instructions` stay as sent), and facts are
        extracted from the user's last input message and the answer's text once it is
        complete. The same headers turn memory off and name the session. Streams the
        provider's events as they come when `stream` is true.
        """
        body = _read_body()
        return forward_with_memory(body, input_user_text(body["input"]), RESPONSES)
