"""Memories as a remote backend sends and takes them: the REST API's camelCase JSON."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from omniroute.memory.backends.base import BackendError, NewMemory
from omniroute.memory.model import Memory, MemoryPage


def memory_from_json(value: Any) -> Memory:
    """A memory from a backend's JSON object; one without an id, key or content is an error."""
    if not isinstance(value, Mapping):
        raise BackendError(f"A memory must be a JSON object, not {type(value).__name__}.")
    missing = [name for name in ("id", "key", "content") if not isinstance(value.get(name), str)]
    if missing:
        raise BackendError(f"A memory lacks {', '.join(missing)}.")
    metadata = value.get("metadata")
    return Memory(
        id=value["id"],
        api_key_id=str(value.get("apiKeyId") or ""),
        session_id=str(value.get("sessionId") or ""),
        type=str(value.get("type") or "factual"),
        key=value["key"],
        content=value["content"],
        metadata=dict(metadata) if isinstance(metadata, Mapping) else {},
        created_at=str(value.get("createdAt") or ""),
        updated_at=str(value.get("updatedAt") or value.get("createdAt") or ""),
        expires_at=value.get("expiresAt") if isinstance(value.get("expiresAt"), str) else None,
        access_count=value.get("accessCount") if isinstance(value.get("accessCount"), int) else 0,
        user_id=str(value.get("userId") or ""),
    )


def page_from_json(value: Any) -> MemoryPage:
    """A list answer: `{data, total, byType}` as our API sends it, or a bare list."""
    if isinstance(value, list):
        items = value
        total, by_type = len(value), {}
    elif isinstance(value, Mapping) and isinstance(value.get("data"), list):
        items = value["data"]
        total = value.get("total") if isinstance(value.get("total"), int) else len(items)
        by_type = value.get("byType") if isinstance(value.get("byType"), dict) else {}
    else:
        raise BackendError("A list answer must be a JSON list or {data: [...]}.")
    return MemoryPage(data=[memory_from_json(item) for item in items], total=total, by_type=by_type)


def memories_from_json(value: Any) -> list[Memory]:
    """A search answer: a list, or `{data}` / `{memories}` holding one."""
    if isinstance(value, Mapping):
        value = value.get("data", value.get("memories"))
    if not isinstance(value, list):
        raise BackendError("A search answer must be a JSON list of memories.")
    return [memory_from_json(item) for item in value]


def new_memory_json(memory: NewMemory) -> dict[str, Any]:
    """The reference's fields, and `userId` when the memory is an end user's."""
    sent = {
        "apiKeyId": memory.api_key_id,
        "key": memory.key,
        "content": memory.content,
        "type": memory.type,
        "sessionId": memory.session_id,
        "metadata": dict(memory.metadata),
        "expiresAt": memory.expires_at,
    }
    return {**sent, "userId": memory.user_id} if memory.user_id else sent


CHANGE_NAMES = {"session_id": "sessionId", "expires_at": "expiresAt"}


def changes_json(changes: Mapping[str, Any]) -> dict[str, Any]:
    """Changed fields under their JSON names (`session_id` → `sessionId`)."""
    return {CHANGE_NAMES.get(name, name): value for name, value in changes.items()}
