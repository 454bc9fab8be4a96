"""What mem0's `add` stores: with `infer` (mem0's default) the facts the gateway's own
extraction finds in the messages, as a chat's would be; without it each message as given,
under a key made from its text (adding the same text again changes nothing)."""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from omniroute.api.mem0.shapes import IN_METADATA, BadInput, Entities
from omniroute.core.messages import content_text
from omniroute.memory.backends.base import NewMemory
from omniroute.memory.extraction import facts_as_memories

# A message's role and the source its facts record, as a chat's extraction records them.
SOURCES = {"user": "user_message", "assistant": "llm_response"}
MAX_MESSAGES = 200
MAX_TEXT_CHARS = 64 * 1024


@dataclass(frozen=True)
class Message:
    role: str
    text: str


def messages_of(given: Any) -> list[Message]:
    """The messages of an add: a string (a user's message), one message, or a list of them,
    each `{role, content}` with content a string or a list of text parts."""
    if isinstance(given, str):
        given = [{"role": "user", "content": given}]
    elif isinstance(given, Mapping):
        given = [given]
    if not isinstance(given, list) or not given:
        raise BadInput("messages", "must be a string, a message or a non-empty list of messages")
    if len(given) > MAX_MESSAGES:
        raise BadInput("messages", f"holds at most {MAX_MESSAGES} messages")
    found = []
    for index, message in enumerate(given):
        where = f"messages.{index}"
        if not isinstance(message, Mapping) or not isinstance(message.get("role"), str):
            raise BadInput(where, "must be an object with a role and a content")
        if not isinstance(message.get("content"), str | list):
            raise BadInput(f"{where}.content", "must be a string or a list of text parts")
        text = content_text(message["content"]).strip()
        if len(text) > MAX_TEXT_CHARS:
            raise BadInput(f"{where}.content", f"has at most {MAX_TEXT_CHARS} characters")
        if text:
            found.append(Message(message["role"], text))
    return found


def memories_to_add(
    api_key_id: str,
    messages: list[Message],
    entities: Entities,
    *,
    infer: bool,
    metadata: Mapping[str, Any],
    expires_at: str | None,
) -> list[NewMemory]:
    """The memories an add writes (upserts on their keys, per end user)."""
    kept = {**metadata, **{n: getattr(entities, n) for n in IN_METADATA if getattr(entities, n)}}
    owner = {
        "api_key_id": api_key_id,
        "session_id": entities.run_id or "",
        "user_id": entities.user_id or "",
    }
    if infer:
        return [
            NewMemory(**{**new.fields(), "expires_at": expires_at})
            for message in messages
            if message.role in SOURCES
            for new in facts_as_memories(
                message.text, source=SOURCES[message.role], metadata=kept, **owner
            )
        ]
    return [
        NewMemory(
            key="mem0:" + hashlib.sha256(message.text.encode("utf-8")).hexdigest()[:16],
            content=message.text,
            metadata={**kept, "source": "mem0", "role": message.role},
            expires_at=expires_at,
            **owner,
        )
        for message in messages
    ]
