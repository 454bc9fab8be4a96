"""A memory as the outside sees it: the one JSON shape of the REST API, MCP and exports."""

from __future__ import annotations

import marshmallow as ma
from marshmallow.validate import Length, Regexp

from omniroute.memory.model import MAX_USER_CHARS, USER_ID_PATTERN, USER_ID_RULE


def user_id_field(description: str, *, required: bool = False, **kwargs) -> ma.fields.String:
    """An end user's id (docs/scopes.md): text of at most MAX_USER_CHARS characters, not
    blank, without control characters; '' names none (unless it is `required`)."""
    return ma.fields.String(
        required=required,
        validate=[
            Length(1 if required else 0, MAX_USER_CHARS),
            Regexp(USER_ID_PATTERN, error=USER_ID_RULE),
        ],
        metadata={"description": description},
        **kwargs,
    )


class MemorySchema(ma.Schema):
    id = ma.fields.String()
    apiKeyId = ma.fields.String(attribute="api_key_id")
    sessionId = ma.fields.String(attribute="session_id")
    userId = ma.fields.String(
        attribute="user_id",
        metadata={"description": "The end user of the key it belongs to; '' for the key's own."},
    )
    scope = ma.fields.String(
        metadata={
            "description": "`user` (one end user's), `key` (the key's shared memories) or "
            "`global` (no key's: every key's chats read it)."
        }
    )
    type = ma.fields.String()
    key = ma.fields.String()
    content = ma.fields.String()
    metadata = ma.fields.Dict()
    createdAt = ma.fields.String(attribute="created_at")
    updatedAt = ma.fields.String(attribute="updated_at")
    expiresAt = ma.fields.String(attribute="expires_at", allow_none=True)
    accessCount = ma.fields.Integer(attribute="access_count")
    lastAccessedAt = ma.fields.String(attribute="last_accessed_at", allow_none=True)
