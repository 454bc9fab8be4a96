"""What a memory is: its types, its fields, and how rows become Memory objects."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, fields
from typing import Any

MEMORY_TYPES = ("factual", "episodic", "procedural", "semantic")


@dataclass(frozen=True)
class Memory:
    id: str
    api_key_id: str
    session_id: str
    type: str
    key: str
    content: str
    metadata: dict[str, Any]
    created_at: str
    updated_at: str
    expires_at: str | None = None
    access_count: int = 0
    last_accessed_at: str | None = None

    @classmethod
    def from_row(cls, row: Mapping[str, Any]) -> Memory:
        return cls.from_values([row[name] for name in MEMORY_COLUMNS])

    @classmethod
    def from_values(cls, values: Sequence[Any]) -> Memory:
        """Build from the values of MEMORY_COLUMNS, in that order (the fast path for search)."""
        values = list(values[: len(MEMORY_COLUMNS)])
        values[_METADATA] = load_metadata(values[_METADATA])
        return cls(*values)

    def is_expired(self, now_iso: str) -> bool:
        return self.expires_at is not None and self.expires_at <= now_iso


# The columns of `memories` that a Memory is made of, in the order of its fields.
MEMORY_COLUMNS = tuple(field.name for field in fields(Memory))
_METADATA = MEMORY_COLUMNS.index("metadata")


@dataclass(frozen=True)
class MemoryFilter:
    api_key_id: str | None = None
    type: str | None = None
    session_id: str | None = None
    # A literal, case-insensitive substring of content or key (`%` and `_` match themselves).
    text: str | None = None
    # Only memories created at or after this time (ISO text, as stored).
    created_after: str | None = None
    # Only memories created before this time (ISO text, as stored).
    created_before: str | None = None


@dataclass(frozen=True)
class MemoryPage:
    data: list[Memory]
    total: int
    by_type: dict[str, int] = field(default_factory=dict)
    tokens_used: int = 0
    # How many of the matching memories have been injected into a prompt at least once.
    accessed: int = 0


def dump_metadata(metadata: Mapping[str, Any]) -> str:
    return json.dumps(dict(metadata), ensure_ascii=False, separators=(",", ":"))


def load_metadata(text: str | None) -> dict[str, Any]:
    """Parse stored metadata; anything that is not a JSON object reads as {}."""
    if not text or text == "{}":  # most memories' (a search builds a hundred of them)
        return {}
    try:
        value = json.loads(text or "{}")
    except ValueError:
        return {}
    return value if isinstance(value, dict) else {}
