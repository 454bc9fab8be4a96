"""Reading texts out of chat and Responses bodies: the user's last message, the reply, and
a streamed reply."""

from __future__ import annotations

import json
from typing import Any

from omniroute.core.messages import content_text


def last_user_text(messages: list[Any]) -> str:
    """The text of the last message with role `user` (tool and other roles are skipped)."""
    for message in reversed(messages):
        if isinstance(message, dict) and message.get("role") == "user":
            return content_text(message.get("content"))
    return ""


def reply_text(payload: Any) -> str:
    """The assistant's text in a chat completion: choices[0].message.content."""
    try:
        return content_text(payload["choices"][0]["message"]["content"])
    except (KeyError, IndexError, TypeError):
        return ""


def input_user_text(given: Any) -> str:
    """The user's text in a Responses request's `input`: the string itself, or the text of
    the last user message among its items (function calls, outputs and reasoning skipped)."""
    if isinstance(given, str):
        return given
    return last_user_text(given) if isinstance(given, list) else ""


def response_text(payload: Any) -> str:
    """The assistant's text in a Responses object: `output_text` where the provider sends
    it, else the text parts of its assistant messages in `output`, joined by newlines."""
    if not isinstance(payload, dict):
        return ""
    if isinstance(payload.get("output_text"), str):
        return payload["output_text"]
    items = payload.get("output")
    if not isinstance(items, list):
        return ""
    texts = [
        content_text(item.get("content"))
        for item in items
        if isinstance(item, dict)
        and item.get("type") == "message"
        and item.get("role", "assistant") == "assistant"
    ]
    return "\n".join(text for text in texts if text)


class StreamedReply:
    """Collects the assistant's text from SSE chunks as they pass through: choice 0's only
    (with `n` above 1 each chunk carries one choice, by its index)."""

    def __init__(self) -> None:
        self._buffer = b""
        self._parts: list[str] = []

    def feed(self, chunk: bytes) -> None:
        self._buffer += chunk
        *lines, self._buffer = self._buffer.split(b"\n")
        for line in lines:
            self._line(line.strip())

    def _line(self, line: bytes) -> None:
        if not line.startswith(b"data:"):
            return
        try:
            self._event(json.loads(line[len(b"data:") :]))
        except (ValueError, KeyError, TypeError, AttributeError, StopIteration):
            return

    def _event(self, payload: Any) -> None:
        delta = next(c["delta"] for c in payload["choices"] if c.get("index", 0) == 0)
        text = content_text(delta.get("content")) if isinstance(delta, dict) else ""
        if text:
            self._parts.append(text)

    @property
    def complete(self) -> bool:
        """Whether what streamed is a whole answer (a chat stream has no end marker to
        wait for: a 200 that ended is taken as one)."""
        return True

    @property
    def text(self) -> str:
        return "".join(self._parts)


class StreamedResponse(StreamedReply):
    """Collects the text of a streamed Responses answer: the `response.completed` event's
    response, else the `response.output_text.delta` events joined. Only a stream that
    reached `response.completed` counts as whole (not one that failed or was cut off)."""

    def __init__(self) -> None:
        super().__init__()
        self._completed: dict[str, Any] | None = None

    def _event(self, payload: Any) -> None:
        kind = payload["type"]
        if kind == "response.output_text.delta" and isinstance(payload["delta"], str):
            self._parts.append(payload["delta"])
        elif kind == "response.completed":
            self._completed = payload["response"]

    @property
    def complete(self) -> bool:
        return self._completed is not None

    @property
    def text(self) -> str:
        return response_text(self._completed) or super().text
