"""/api/memory/export and /api/memory/import: move memories out and back in as JSON."""

from __future__ import annotations

import json
import logging
from collections.abc import Iterator
from typing import Any

import marshmallow as ma
from flask import Response, stream_with_context
from flask.views import MethodView
from flask_smorest import Blueprint
from marshmallow.validate import Length
from sqlalchemy.exc import SQLAlchemyError

from omniroute.api.memories import new_memory, owner_problem
from omniroute.api.memory_schemas import MemoryCreateSchema, MemorySchema
from omniroute.core.clock import to_iso, utc_now
from omniroute.core.errors import field_details
from omniroute.memory.listing import ListingQuery, filters_from, iter_live
from omniroute.memory.model import MEMORY_TYPES
from omniroute.memory.store import KeyConflict
from omniroute.services import services

blp = Blueprint(
    "memory-transfer", __name__, url_prefix="/api/memory", description="Memory export and import"
)

log = logging.getLogger(__name__)

MAX_IMPORT_ITEMS = 10_000
IMPORT_BATCH = 100  # memories written per transaction: other writers wait at most one batch
ITEM_SCHEMA = MemoryCreateSchema(unknown=ma.EXCLUDE)  # made once: making one copies its fields


class ExportArgs(ListingQuery):
    class Meta:
        exclude = ("page", "limit", "offset")


class ImportSchema(ma.Schema):
    memories = ma.fields.List(
        ma.fields.Raw(allow_none=True),  # each item is checked and reported on its own
        required=True,
        validate=Length(1, MAX_IMPORT_ITEMS),
        metadata={"description": "Memories as export writes them; unknown fields are ignored."},
    )
    apiKeyId = ma.fields.String(
        validate=Length(min=1),
        metadata={"description": "Import every memory into this key, whatever the file says."},
    )


class ImportResultSchema(ma.Schema):
    index = ma.fields.Integer()
    key = ma.fields.Raw(allow_none=True)
    status = ma.fields.String(metadata={"description": "created, updated or failed"})
    id = ma.fields.String()
    warnings = ma.fields.List(ma.fields.String())
    errors = ma.fields.List(ma.fields.Dict())


class ImportSummarySchema(ma.Schema):
    created = ma.fields.Integer()
    updated = ma.fields.Integer()
    failed = ma.fields.Integer()
    results = ma.fields.List(ma.fields.Nested(ImportResultSchema))


@blp.route("/export")
class MemoryExport(MethodView):
    @blp.arguments(ExportArgs, location="query")
    @blp.response(200, description="A JSON file: `{exportedAt, filters, memories, count}`.")
    def get(self, args):
        """Export every memory that matches the filters

        Takes the list's filters (not its paging) and streams all matches, newest first, as
        a JSON file that /api/memory/import reads back.
        """
        stamp = utc_now()
        name = f"omniroute-memories-{stamp:%Y%m%d-%H%M%S}.json"
        body = _export_json(args, to_iso(stamp))
        return Response(
            stream_with_context(body),
            mimetype="application/json",
            headers={"Content-Disposition": f'attachment; filename="{name}"'},
        )


def _export_json(args: dict[str, Any], exported_at: str) -> Iterator[str]:
    schema = MemorySchema()
    yield f'{{"exportedAt": {json.dumps(exported_at)}, "filters": {json.dumps(args)},'
    yield ' "memories": ['
    count = 0
    for memory in iter_live(services().memories, filters_from(args)):
        yield ("," if count else "") + "\n  " + json.dumps(schema.dump(memory), ensure_ascii=False)
        count += 1
    yield f'\n], "count": {count}}}\n'


@blp.route("/import")
class MemoryImport(MethodView):
    @blp.arguments(ImportSchema)
    @blp.response(200, ImportSummarySchema)
    def post(self, body):
        """Import memories, each on its own terms

        Every item is checked like a POST /api/memory body and upserted on (apiKeyId, key);
        one bad item does not stop the others. A type that is not a memory type is stored
        as `factual`, with a warning. The summary has one result per item, in order.
        """
        active_keys = {key.id for key in services().keys.list_keys()}
        results: list[dict[str, Any]] = []
        valid: list[tuple[dict[str, Any], dict[str, Any]]] = []
        for index, item in enumerate(body["memories"]):
            result, loaded = _check_item(index, item, body.get("apiKeyId"), active_keys)
            results.append(result)
            if loaded is not None:
                valid.append((result, loaded))
        store = services().memories
        for start in range(0, len(valid), IMPORT_BATCH):
            _write_batch(store, valid[start : start + IMPORT_BATCH])
        if valid:
            store.notify_write()
        counts = {status: 0 for status in ("created", "updated", "failed")}
        for result in results:
            counts[result["status"]] += 1
        return {**counts, "results": results}


def _write_batch(store, batch: list[tuple[dict[str, Any], dict[str, Any]]]) -> None:
    """Upsert a batch in one transaction; when a write fails, undo it and write each item in
    a savepoint of its own, so only the failing one is reported as failed (a savepoint for
    every item took two statements of the five an item cost)."""
    try:
        with store.db.write() as conn:
            written = store.create_many([new_memory(loaded).fields() for _, loaded in batch], conn)
            for (result, _), (memory, created) in zip(batch, written, strict=True):
                result.update(status="created" if created else "updated", id=memory.id)
        return
    except (SQLAlchemyError, KeyConflict):
        for result, _ in batch:
            result.update(status="failed")
            result.pop("id", None)
    with store.db.write() as conn:
        for result, loaded in batch:
            _write_item(conn, result, loaded)


def _write_item(conn, result: dict[str, Any], loaded: dict[str, Any]) -> None:
    """Upsert one item in a savepoint of its own: a write that fails undoes only that item,
    which is reported as failed, and the rest of the file goes in."""
    try:
        with conn.begin_nested():
            fields = new_memory(loaded).fields()
            memory, created = services().memories.create(**fields, connection=conn)
    except (SQLAlchemyError, KeyConflict) as exc:
        log.warning("import: item %d not written: %s", result["index"], exc)
        result["errors"] = [{"field": "body", "message": f"Not written: {_reason(exc)}"}]
        return
    result.update(status="created" if created else "updated", id=memory.id)


def _reason(exc: Exception) -> str:
    if isinstance(exc, KeyConflict):
        return str(exc)
    original = getattr(exc, "orig", None)
    return str(original or exc).splitlines()[0]


def _check_item(
    index: int, item: Any, api_key_id: str | None, active_keys: set[str]
) -> tuple[dict[str, Any], dict[str, Any] | None]:
    """The item's result so far, and the loaded body when it can be written."""
    if not isinstance(item, dict):
        result = {"index": index, "key": None, "status": "failed", "warnings": []}
        result["errors"] = [{"field": "body", "message": "Each memory must be a JSON object."}]
        return result, None
    result = {"index": index, "key": item.get("key"), "status": "failed", "warnings": []}
    item = dict(item)
    if api_key_id:
        item["apiKeyId"] = api_key_id
    if item.get("type", "factual") not in MEMORY_TYPES:
        result["warnings"].append(f"type {item['type']!r} is not a memory type: stored as factual")
        item["type"] = "factual"
    try:
        loaded = ITEM_SCHEMA.load(item)
    except ma.ValidationError as exc:
        result["errors"] = field_details({"json": exc.messages})
        return result, None
    if problem := owner_problem(loaded["apiKeyId"], loaded["userId"], active_keys.__contains__):
        result["errors"] = [{"field": problem[0], "message": problem[1]}]
        return result, None
    return result, loaded
