"""The text of an OpenAI-style chat message, as every face that reads messages reads it (a
chat's body, mem0's `add`)."""

from __future__ import annotations

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
