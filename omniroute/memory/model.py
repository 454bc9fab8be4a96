"""What a memory is: its types, its fields, and how rows become Memory objects."""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, fields
from typing import Any

from omniroute.core.text_rules import text_problem

MEMORY_TYPES = ("factual", "episodic", "procedural", "semantic")
# Joins a key and one of its end users into their search partition: no id may hold it.
USER_SEPARATOR = "\x1f"
# Whose memories a filter lists: nobody's key (global), a key's shared ones, end users'.
SCOPES = ("global", "key", "user")


MAX_USER_CHARS = 256


# An end user's id, or '' (none): no control character (C0, DEL, C1; the separator of
# owner_of is one), something besides white space. One rule: the REST schemas state it as
# their pattern (so the spec says it too), chats and MCP through user_id_problem.
_CONTROLS = r"\x00-\x1f\x7f-\x9f"
USER_ID_PATTERN = rf"^([^{_CONTROLS}]*[^\s{_CONTROLS}][^{_CONTROLS}]*)?(?![\s\S])"
USER_ID_RULE = (
    "An end user's id is text with something besides white space and no control character."
)
_USER_ID = re.compile(USER_ID_PATTERN)


def user_id_problem(user_id: str) -> str | None:
    """Why `user_id` cannot name an end user, or None: at most MAX_USER_CHARS characters,
    USER_ID_PATTERN's, not empty, no lone surrogate."""
    if len(user_id) > MAX_USER_CHARS:
        return f"An end user's id has at most {MAX_USER_CHARS} characters."
    if not user_id or not _USER_ID.match(user_id) or text_problem(user_id):
        return USER_ID_RULE
    return None


def owner_of(api_key_id: str, user_id: str = "") -> str:
    """The search partition a memory lives in, as the `owner` column computes it: the key
    for its shared memories ('' for global ones), the key and the user for a user's."""
    return f"{api_key_id}{USER_SEPARATOR}{user_id}" if user_id else api_key_id


def split_owner(owner: str) -> tuple[str, str]:
    """(api_key_id, user_id) of a search partition: owner_of undone."""
    api_key_id, _, user_id = owner.partition(USER_SEPARATOR)
    return api_key_id, user_id


def scope_of(api_key_id: str, user_id: str) -> str:
    """`global`, `key` or `user`: who a memory belongs to."""
    if not api_key_id:
        return "global"
    return "user" if user_id else "key"


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
    user_id: str = ""  # the end user of its key it belongs to; '' for the key's shared ones

    @property
    def owner(self) -> str:
        return owner_of(self.api_key_id, self.user_id)

    @property
    def scope(self) -> str:
        return scope_of(self.api_key_id, self.user_id)

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
    api_key_id: str | None = None  # '' is the global memories
    type: str | None = None
    session_id: str | None = None
    user_id: str | None = None  # '' is the key's shared memories
    scope: str | None = None  # one of SCOPES
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
