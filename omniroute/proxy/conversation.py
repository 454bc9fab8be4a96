"""Reading texts out of chat bodies: the user's last message, the reply, a streamed reply."""

from __future__ import annotations

import json
from typing import Any

TEXT_PART_TYPES = frozenset({"text", "input_text", "output_text"})


def content_text(content: Any) -> str:
    """The text of a message's content: a string, or its text parts joined by newlines."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        parts = [
            part.get("text", "")
            for part in content
            if isinstance(part, dict) and part.get("type") in TEXT_PART_TYPES
        ]
        return "\n".join(part for part in parts if isinstance(part, str) and part)
    return ""


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
        data = line[len(b"data:") :].strip()
        try:
            choices = json.loads(data)["choices"]
            delta = next(c["delta"] for c in choices if c.get("index", 0) == 0)
        except (ValueError, KeyError, TypeError, AttributeError, StopIteration):
            return
        text = content_text(delta.get("content")) if isinstance(delta, dict) else ""
        if text:
            self._parts.append(text)

    @property
    def text(self) -> str:
        return "".join(self._parts)
