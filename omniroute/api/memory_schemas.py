"""Request and response schemas of /api/memory."""

from __future__ import annotations

import marshmallow as ma
from marshmallow.validate import Length, OneOf

from omniroute.core.clock import utc_now
from omniroute.core.fields import ChangeSchema, Timestamp, not_blank, plain_json
from omniroute.memory.model import MEMORY_TYPES
from omniroute.memory.schemas import MemorySchema, user_id_field

MAX_CONTENT_CHARS = 65_536
MAX_KEY_CHARS = 256
MAX_SESSION_CHARS = 256


def _in_future(value) -> None:
    if value is not None and value <= utc_now():
        raise ma.ValidationError("Must be in the future (an expired memory is never returned).")


def _content(**kwargs) -> ma.fields.String:
    return ma.fields.String(validate=[Length(1, MAX_CONTENT_CHARS), not_blank], **kwargs)


def _key(**kwargs) -> ma.fields.String:
    return ma.fields.String(validate=[Length(1, MAX_KEY_CHARS), not_blank], **kwargs)


def _type(**kwargs) -> ma.fields.String:
    return ma.fields.String(validate=OneOf(MEMORY_TYPES), **kwargs)


class CacheStatsSchema(ma.Schema):
    hits = ma.fields.Integer()
    misses = ma.fields.Integer()


class MemoryStatsSchema(ma.Schema):
    total = ma.fields.Integer()
    byType = ma.fields.Dict(keys=ma.fields.String(), values=ma.fields.Integer())
    tokensUsed = ma.fields.Integer()
    hitRate = ma.fields.Float(
        metadata={"description": "Share of the matching memories injected at least once."}
    )
    cacheStats = ma.fields.Nested(CacheStatsSchema)


class MemoryListSchema(ma.Schema):
    data = ma.fields.List(ma.fields.Nested(MemorySchema))
    total = ma.fields.Integer()
    page = ma.fields.Integer()
    limit = ma.fields.Integer()
    totalPages = ma.fields.Integer()
    stats = ma.fields.Nested(MemoryStatsSchema)
    backend = ma.fields.String(
        metadata={"description": "The backend that served the list: `local`, or the primary's id."}
    )


class MemoryCreateSchema(ma.Schema):
    content = _content(required=True)
    key = _key(required=True)
    type = _type(load_default="factual")
    sessionId = ma.fields.String(load_default="", validate=Length(max=MAX_SESSION_CHARS))
    apiKeyId = ma.fields.String(
        load_default="",
        metadata={
            "description": "Id of a gateway key; absent or '' makes a global memory, which "
            "every key's chats read (docs/scopes.md)."
        },
    )
    userId = user_id_field(
        "The end user of the key it is for (absent: the key's shared memory); not with a "
        "global memory.",
        load_default="",
    )
    metadata = ma.fields.Dict(keys=ma.fields.String(), load_default=dict, validate=plain_json)
    expiresAt = Timestamp(allow_none=True, load_default=None, validate=_in_future)


class MemoryUpdateSchema(ChangeSchema):
    content = _content()
    key = _key()
    type = _type()
    sessionId = ma.fields.String(validate=Length(max=MAX_SESSION_CHARS))
    metadata = ma.fields.Dict(
        keys=ma.fields.String(),
        validate=plain_json,
        metadata={"description": "Replaces the metadata."},
    )
    expiresAt = Timestamp(allow_none=True, validate=_in_future)


class MemoryEnvelopeSchema(ma.Schema):
    memory = ma.fields.Nested(MemorySchema)


class MemoryCreatedSchema(MemoryEnvelopeSchema):
    created = ma.fields.Boolean(
        metadata={"description": "False when an existing memory with this key was updated."}
    )


class MemoryUpdatedSchema(MemoryEnvelopeSchema):
    success = ma.fields.Boolean()


class SuccessSchema(ma.Schema):
    success = ma.fields.Boolean()


class HistoryEntrySchema(ma.Schema):
    action = ma.fields.String()
    apiKeyId = ma.fields.String(attribute="api_key_id")
    oldType = ma.fields.String(attribute="old_type", allow_none=True)
    newType = ma.fields.String(attribute="new_type", allow_none=True)
    oldKey = ma.fields.String(attribute="old_key", allow_none=True)
    newKey = ma.fields.String(attribute="new_key", allow_none=True)
    oldContent = ma.fields.String(attribute="old_content", allow_none=True)
    newContent = ma.fields.String(attribute="new_content", allow_none=True)
    createdAt = ma.fields.String(attribute="created_at")
    reason = ma.fields.String(
        allow_none=True,
        metadata={
            "description": "Why the life cycle deleted or rewrote it (expired, retention, "
            "decay, summarized, compacted, cleared); null for a person's own change."
        },
    )


class HistorySchema(ma.Schema):
    data = ma.fields.List(ma.fields.Nested(HistoryEntrySchema))


class HealthSchema(ma.Schema):
    working = ma.fields.Boolean()
    latencyMs = ma.fields.Integer()
