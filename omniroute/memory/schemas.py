"""A memory as the outside sees it: the one JSON shape of the REST API, MCP and exports."""

from __future__ import annotations

import marshmallow as ma


class MemorySchema(ma.Schema):
    id = ma.fields.String()
    apiKeyId = ma.fields.String(attribute="api_key_id")
    sessionId = ma.fields.String(attribute="session_id")
    type = ma.fields.String()
    key = ma.fields.String()
    content = ma.fields.String()
    metadata = ma.fields.Dict()
    createdAt = ma.fields.String(attribute="created_at")
    updatedAt = ma.fields.String(attribute="updated_at")
    expiresAt = ma.fields.String(attribute="expires_at", allow_none=True)
    accessCount = ma.fields.Integer(attribute="access_count")
    lastAccessedAt = ma.fields.String(attribute="last_accessed_at", allow_none=True)
