"""Request and response schemas of the memory life cycle: bulk clearing, summarising,
compacting to a budget, and the periodic jobs."""

from __future__ import annotations

import marshmallow as ma
from marshmallow.validate import Length, OneOf, Range

from omniroute.core.fields import StrictBoolean, Timestamp
from omniroute.memory.model import MEMORY_TYPES, SCOPES
from omniroute.memory.schemas import user_id_field

MAX_BUDGET = 1_000_000


class ClearQuery(ma.Schema):
    apiKeyId = ma.fields.String(
        validate=Length(min=1),
        metadata={
            "description": "The key whose memories go: required, never every key, unless "
            "`scope` is `global` (then absent)."
        },
    )
    scope = ma.fields.String(
        validate=OneOf(SCOPES),
        metadata={
            "description": "`global`: the global memories (no key); `key`: the key's shared "
            "ones; `user`: its end users' (docs/scopes.md)."
        },
    )
    type = ma.fields.String(validate=OneOf(MEMORY_TYPES))
    sessionId = ma.fields.String()
    userId = user_id_field("Only this end user's memories (a person asking to be forgotten).")
    olderThan = Timestamp(metadata={"description": "Only memories created before it."})
    dryRun = ma.fields.Boolean(
        load_default=False, metadata={"description": "Count what would go; delete nothing."}
    )


class EraseUserSchema(ma.Schema):
    apiKeyId = ma.fields.String(required=True, validate=Length(min=1))
    userId = user_id_field("The end user to forget.", required=True)


class ClearedSchema(ma.Schema):
    matched = ma.fields.Integer(metadata={"description": "Memories that match the filters."})
    deletedCount = ma.fields.Integer()
    dryRun = ma.fields.Boolean()


class SummarizeSchema(ma.Schema):
    olderThanDays = ma.fields.Integer(load_default=30, validate=Range(1, 365), strict=True)
    apiKeyId = ma.fields.String(
        validate=Length(min=1), metadata={"description": "Absent: every key, each on its own."}
    )
    sessionId = ma.fields.String()
    dryRun = StrictBoolean(load_default=False)


class SummaryKeySchema(ma.Schema):
    apiKeyId = ma.fields.String()
    candidates = ma.fields.Integer()
    totalTokens = ma.fields.Integer()


class SummaryItemSchema(ma.Schema):
    id = ma.fields.String()
    apiKeyId = ma.fields.String()
    type = ma.fields.String()
    key = ma.fields.String()
    tokens = ma.fields.Integer()
    createdAt = ma.fields.String()


class SummaryWriterSchema(ma.Schema):
    method = ma.fields.String(metadata={"description": "llm, or extractive."})
    model = ma.fields.String(allow_none=True)
    fallbackReason = ma.fields.String(
        allow_none=True, metadata={"description": "Why the LLM's text was not used."}
    )


class SummaryResultSchema(ma.Schema):
    candidates = ma.fields.Integer(metadata={"description": "Memories old enough to fold."})
    totalTokens = ma.fields.Integer()
    tokensSaved = ma.fields.Integer()
    deletedCount = ma.fields.Integer()
    summaryId = ma.fields.String(allow_none=True, metadata={"description": "The first summary."})
    summaryIds = ma.fields.List(ma.fields.String())
    dryRun = ma.fields.Boolean(metadata={"description": "True too when nothing was old enough."})
    keys = ma.fields.List(ma.fields.Nested(SummaryKeySchema))
    items = ma.fields.List(
        ma.fields.Nested(SummaryItemSchema),
        metadata={"description": "The first 100, oldest first."},
    )
    writer = ma.fields.Nested(SummaryWriterSchema)


class CompactSchema(ma.Schema):
    apiKeyId = ma.fields.String(required=True, validate=Length(min=1))
    sessionId = ma.fields.String()
    maxTokens = ma.fields.Integer(load_default=4000, validate=Range(1, MAX_BUDGET), strict=True)
    dryRun = StrictBoolean(load_default=False)


class CompactResultSchema(ma.Schema):
    originalCount = ma.fields.Integer()
    summarizedCount = ma.fields.Integer()
    tokensBefore = ma.fields.Integer()
    tokensSaved = ma.fields.Integer()
    fits = ma.fields.Boolean(metadata={"description": "Whether the key now fits the budget."})
    dryRun = ma.fields.Boolean()


class PeriodicJobSchema(ma.Schema):
    id = ma.fields.String()
    description = ma.fields.String()
    intervalSeconds = ma.fields.Integer()
    status = ma.fields.String(
        allow_none=True, metadata={"description": "ok, failed, running, or null: never run."}
    )
    lastStartedAt = ma.fields.String(allow_none=True)
    lastFinishedAt = ma.fields.String(allow_none=True)
    durationMs = ma.fields.Integer(allow_none=True)
    result = ma.fields.Dict(allow_none=True)
    error = ma.fields.String(allow_none=True)
    runs = ma.fields.Integer()
    failures = ma.fields.Integer()
    overdue = ma.fields.Boolean(
        metadata={"description": "Not started for two intervals: no scheduler runs it."}
    )


class PeriodicJobRunSchema(PeriodicJobSchema):
    skipped = ma.fields.String(
        allow_none=True, metadata={"description": "Why it did not run (another run holds it)."}
    )


class PeriodicJobsSchema(ma.Schema):
    scheduler = ma.fields.String(metadata={"description": "Who triggers the periodic jobs."})
    jobs = ma.fields.List(ma.fields.Nested(PeriodicJobSchema))
