"""The bodies mem0's client sends and the answers it reads, for validation and the spec.

mem0's bodies carry options this gateway has no use for (custom_categories, output_format,
version...): unknown fields are dropped, as mem0's own server ignores what it does not know.
"""

from __future__ import annotations

import marshmallow as ma
from marshmallow.validate import Length, OneOf, Range

from omniroute.api.mem0.adding import MAX_MESSAGES
from omniroute.api.memory_schemas import MAX_CONTENT_CHARS
from omniroute.core.fields import StrictBoolean, plain_json

ENTITY_DOC = {
    "user_id": "An end user of the key (docs/scopes.md): their memories are theirs alone.",
    "agent_id": "Kept in the memory's metadata; filters match it.",
    "app_id": "Kept in the memory's metadata; filters match it.",
    "run_id": "A session: the gateway's sessionId.",
}
FILTERS_DOC = (
    "Entity ids (`user_id`, `agent_id`, `app_id`, `run_id`; `*` for any), `AND` lists of "
    "such objects, and `created_at` with `gte`, `gt`, `lte`, `lt`. Other mem0 filters (`OR`, "
    "`NOT`, metadata, categories) are refused with 400 naming them."
)


class Lenient(ma.Schema):
    class Meta:
        unknown = ma.EXCLUDE


def _entities() -> dict[str, ma.fields.Field]:
    return {
        name: ma.fields.String(allow_none=True, metadata={"description": text})
        for name, text in ENTITY_DOC.items()
    }


def _filters() -> ma.fields.Dict:
    return ma.fields.Dict(allow_none=True, metadata={"description": FILTERS_DOC})


class Mem0AddSchema(Lenient.from_dict(_entities())):
    messages = ma.fields.Raw(
        required=True,
        metadata={
            "description": "A string (a user's message), a message `{role, content}`, or a "
            "list of them (content: a string or text parts). One of user_id, agent_id, "
            "app_id or run_id is required beside it.",
            "oneOf": [
                {"type": "string"},
                {"type": "object"},
                {
                    "type": "array",
                    "minItems": 1,
                    "maxItems": MAX_MESSAGES,
                    "items": {"type": "object"},
                },
            ],
        },
    )
    metadata = ma.fields.Dict(keys=ma.fields.String(), allow_none=True, validate=plain_json)
    infer = StrictBoolean(
        load_default=True,
        metadata={
            "description": "true (mem0's default): store the facts the gateway's extraction "
            "finds, as from a chat; false: store each message as given."
        },
    )
    filters = _filters()
    expiration_date = ma.fields.Date(
        allow_none=True, metadata={"description": "YYYY-MM-DD: the memories expire then."}
    )


class Mem0ListSchema(Lenient.from_dict(_entities())):
    filters = _filters()


class Mem0PageQuery(ma.Schema):
    page = ma.fields.Integer(load_default=1, validate=Range(min=1))
    page_size = ma.fields.Integer(load_default=100, validate=Range(1, 1000))


class Mem0SearchSchema(Lenient.from_dict(_entities())):
    query = ma.fields.String(required=True, validate=Length(1, 4000))
    filters = _filters()
    top_k = ma.fields.Integer(load_default=10, validate=Range(1, 100))
    threshold = ma.fields.Float(
        allow_none=True, validate=Range(0, 1), metadata={"description": "The lowest score kept."}
    )


class Mem0UpdateSchema(Lenient):
    text = ma.fields.String(validate=Length(1, MAX_CONTENT_CHARS))
    metadata = ma.fields.Dict(
        keys=ma.fields.String(),
        allow_none=True,
        validate=plain_json,
        metadata={"description": "Replaces the metadata (agent_id and app_id stay)."},
    )
    expiration_date = ma.fields.Date(allow_none=True)


class Mem0EntitiesQuery(Lenient.from_dict(_entities())):
    pass


class Mem0MemorySchema(ma.Schema):
    id = ma.fields.String()
    memory = ma.fields.String()
    user_id = ma.fields.String(allow_none=True)
    agent_id = ma.fields.String(allow_none=True)
    app_id = ma.fields.String(allow_none=True)
    run_id = ma.fields.String(allow_none=True)
    hash = ma.fields.String(metadata={"description": "md5 of the text, as mem0's"})
    metadata = ma.fields.Dict(allow_none=True)
    categories = ma.fields.List(ma.fields.String())
    immutable = ma.fields.Boolean()
    expiration_date = ma.fields.String(allow_none=True)
    created_at = ma.fields.String()
    updated_at = ma.fields.String()


class Mem0ScoredMemorySchema(Mem0MemorySchema):
    score = ma.fields.Float(allow_none=True)


class Mem0PageSchema(ma.Schema):
    count = ma.fields.Integer()
    next = ma.fields.String(allow_none=True)
    previous = ma.fields.String(allow_none=True)
    results = ma.fields.List(ma.fields.Nested(Mem0MemorySchema))


class Mem0SearchResultSchema(ma.Schema):
    results = ma.fields.List(ma.fields.Nested(Mem0ScoredMemorySchema))


class Mem0AddedSchema(ma.Schema):
    id = ma.fields.String()
    memory = ma.fields.String()
    event = ma.fields.String(validate=OneOf(["ADD", "UPDATE"]))


class Mem0AddResultSchema(ma.Schema):
    message = ma.fields.String()
    status = ma.fields.String(
        metadata={"description": "SUCCEEDED: done before the answer (mem0 queues, PENDING)."}
    )
    event_id = ma.fields.String()
    results = ma.fields.List(ma.fields.Nested(Mem0AddedSchema))


class Mem0MessageSchema(ma.Schema):
    message = ma.fields.String()


class Mem0HistoryEntrySchema(ma.Schema):
    id = ma.fields.String()
    memory_id = ma.fields.String()
    user_id = ma.fields.String(allow_none=True)
    event = ma.fields.String(metadata={"description": "ADD, UPDATE or DELETE"})
    old_memory = ma.fields.String(allow_none=True)
    new_memory = ma.fields.String(allow_none=True)
    reason = ma.fields.String(allow_none=True)
    created_at = ma.fields.String()
    updated_at = ma.fields.String()


class Mem0EntitySchema(ma.Schema):
    id = ma.fields.String()
    name = ma.fields.String()
    type = ma.fields.String(metadata={"description": "`user`: an end user of the key"})
    total_memories = ma.fields.Integer()
    owner = ma.fields.String(metadata={"description": "the key's id"})
    created_at = ma.fields.String()
    updated_at = ma.fields.String()


class Mem0EntitiesSchema(ma.Schema):
    results = ma.fields.List(ma.fields.Nested(Mem0EntitySchema))


class Mem0PingSchema(ma.Schema):
    status = ma.fields.String()
    message = ma.fields.String()
    org_id = ma.fields.String(allow_none=True)
    project_id = ma.fields.String(allow_none=True)
    user_email = ma.fields.String(allow_none=True)


class Mem0ErrorDetailSchema(ma.Schema):
    field = ma.fields.String()
    message = ma.fields.String()


class Mem0ErrorSchema(ma.Schema):
    """mem0's error shape: `detail` is what its client shows."""

    detail = ma.fields.String()
    error = ma.fields.String(metadata={"description": "The status, as `400 Bad Request`"})
    details = ma.fields.List(ma.fields.Nested(Mem0ErrorDetailSchema))
