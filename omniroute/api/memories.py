"""/api/memory: manage the memories of every gateway key.

List, create, get, change and delete, one by one or many of a key, on the backend that
serves (the local store, or the primary of the memory backends settings; a remote one's
failure is a 502 naming it). History and the pipeline check are the local store's.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from contextlib import contextmanager

from flask import jsonify
from flask.views import MethodView
from flask_smorest import Blueprint, abort
from werkzeug.routing import BaseConverter

from omniroute.api.life_schemas import ClearedSchema, ClearQuery
from omniroute.api.memory_schemas import (
    HealthSchema,
    HistorySchema,
    MemoryCreatedSchema,
    MemoryCreateSchema,
    MemoryEnvelopeSchema,
    MemoryListSchema,
    MemoryUpdatedSchema,
    MemoryUpdateSchema,
    SuccessSchema,
)
from omniroute.core.clock import to_iso
from omniroute.core.errors import abort_invalid, abort_unknown, error_payload
from omniroute.memory.backends.base import BackendError, NeedsKey, NewMemory
from omniroute.memory.backends.serving import ServingMemories
from omniroute.memory.listing import ListingQuery, filters_from
from omniroute.memory.model import MemoryFilter
from omniroute.memory.store import KeyConflict, MemoryNotFound
from omniroute.memory.verify import verify_pipeline
from omniroute.services import services

blp = Blueprint("memory", __name__, url_prefix="/api/memory", description="Memories")


def _not_found(memory_id: str):
    abort(404, message=f"Memory {memory_id} not found.")


@contextmanager
def _served() -> Iterator[ServingMemories]:
    """The serving memories; a remote primary's failure becomes the client's answer."""
    serving = services().serving
    try:
        yield serving
    except NeedsKey as exc:
        abort(422, errors={"query": {"apiKeyId": [str(exc)]}})
    except BackendError as exc:
        abort(502, message=f"Memory backend {serving.serving_id()} failed: {exc}")


@blp.route("")
class MemoryCollection(MethodView):
    @blp.arguments(ListingQuery, location="query")
    @blp.response(200, MemoryListSchema)
    def get(self, args):
        """List memories

        Newest first, expired memories left out. `offset` wins over `page`; `stats` counts
        every memory matching the filters, not only this page (with a remote primary,
        `tokensUsed` and `hitRate` are of this page: the gateway sees no more of it).
        `backend` names who served the list.
        """
        limit = args["limit"]
        offset = args.get("offset", (args["page"] - 1) * limit)
        with _served() as serving:
            return serving.listing(filters_from(args), limit=limit, offset=offset)

    @blp.arguments(ClearQuery, location="query")
    @blp.response(200, ClearedSchema)
    def delete(self, args):
        """Delete many memories of one key, or the global ones

        Every memory of `apiKeyId` (or, with `scope=global`, of no key) that matches the
        other filters, expired ones too, in short batches; each leaves a history row
        (reason `cleared`) and takes its vector and keyword row with it. `dryRun` counts
        them and deletes nothing. With a remote primary, its matches are deleted one by one
        there.
        """
        owner = args.get("apiKeyId")
        if args.get("scope") == "global" and owner is not None:
            abort_invalid("apiKeyId", "Global memories belong to no key: drop apiKeyId.")
        if args.get("scope") != "global" and owner is None:
            abort_invalid("apiKeyId", "Required (never every key), unless scope is global.")
        filters = MemoryFilter(
            api_key_id=owner or "",
            scope=args.get("scope"),
            type=args.get("type"),
            session_id=args.get("sessionId"),
            user_id=args.get("userId") or None,
            created_before=to_iso(args["olderThan"]) if "olderThan" in args else None,
        )
        with _served() as serving:
            matched = serving.clear(filters, dry_run=args["dryRun"])
        deleted = 0 if args["dryRun"] else matched
        return {"matched": matched, "deletedCount": deleted, "dryRun": args["dryRun"]}

    @blp.arguments(MemoryCreateSchema)
    @blp.response(201, MemoryCreatedSchema)
    def post(self, body):
        """Create a memory, or update the key's memory with the same `key`

        An upsert on (apiKeyId, userId, key): an existing memory keeps its id and creation
        time, and its metadata is merged with the new metadata (new values win). Without
        `apiKeyId` the memory is global: every key's chats read it, within the budget share
        `globalBudgetPercent`, and no gateway key can change it (docs/scopes.md).
        """
        if problem := owner_problem(body["apiKeyId"], body["userId"], _active_key):
            field, message = problem
            (abort_unknown if field == "apiKeyId" else abort_invalid)(field, message)
        try:
            with _served() as serving:
                memory, created = serving.create(new_memory(body))
        except KeyConflict as exc:
            abort(409, message=str(exc))
        return {"memory": memory, "created": created}


NO_SUCH_KEY = "No active API key has this id."
GLOBAL_HAS_NO_USER = "A global memory (no apiKeyId) belongs to no end user: drop userId."


def _active_key(api_key_id: str) -> bool:
    return services().keys.get(api_key_id) is not None


def owner_problem(api_key_id: str, user_id: str, is_active) -> tuple[str, str] | None:
    """(field, message) when a memory cannot belong to this key and end user: a key that is
    not active (`is_active(id)` says), or an end user of no key."""
    if not api_key_id:
        return ("userId", GLOBAL_HAS_NO_USER) if user_id else None
    return None if is_active(api_key_id) else ("apiKeyId", NO_SUCH_KEY)


def new_memory(body: dict) -> NewMemory:
    """The memory a loaded MemoryCreateSchema body asks for (whose key the caller checked)."""
    expires_at = body["expiresAt"]
    return NewMemory(
        api_key_id=body["apiKeyId"],
        key=body["key"],
        content=body["content"],
        type=body["type"],
        session_id=body["sessionId"],
        metadata=body["metadata"],
        expires_at=to_iso(expires_at) if expires_at else None,
        user_id=body["userId"],
    )


@blp.route("/health")
class MemoryHealth(MethodView):
    @blp.response(200, HealthSchema)
    @blp.alt_response(503, description="The pipeline check failed; `error` says why.")
    def get(self):
        """Check the memory pipeline

        Writes a test memory, lists it, finds it by keyword search and deletes it, inside a
        transaction that is rolled back, so nothing of it remains.
        """
        result = verify_pipeline(services().memories)
        if result.working:
            return {"working": True, "latencyMs": result.latency_ms}
        payload = error_payload(503, f"Memory pipeline check failed: {result.error}")
        response = jsonify({**payload, "working": False, "latencyMs": result.latency_ms})
        response.status_code = 503
        return response


# Routes beside /api/memory/<memory_id> that a memory id must never be taken for: their
# other methods are a 405 naming theirs, never a memory's GET, PUT or DELETE; the spec names
# them (a test keeps the list in step with the routes).
SIBLING_ROUTES = (
    "backends", "compact", "embedding-providers", "engine-status", "erase", "export", "health",
    "import",
    "reindex", "retrieve-preview", "summarize",
)  # fmt: skip


class MemoryIdConverter(BaseConverter):
    """A path segment that is not one of SIBLING_ROUTES."""

    regex = "(?!(?:" + "|".join(re.escape(name) for name in SIBLING_ROUTES) + ")$)[^/]+"


MEMORY_ID = [
    {
        "in": "path",
        "name": "memory_id",
        # Said in words, not as `not: {enum}`: OpenAPI matches a concrete path before a
        # template, so /api/memory/health is the health route, not a memory id refused; a
        # fuzzer reading `not` sends "health" as a bad id and finds the health check answer.
        "description": "A memory's id: the local store's UUID, or a remote backend's own id "
        f"(never one of the routes beside it: {', '.join(SIBLING_ROUTES)}).",
        "schema": {"type": "string", "minLength": 1},
    }
]


@blp.route("/<memory_id:memory_id>", parameters=MEMORY_ID)
class MemoryItem(MethodView):
    @blp.response(200, MemoryEnvelopeSchema)
    def get(self, memory_id):
        """Get a memory

        From the primary backend, or else from each fallback in turn.
        """
        with _served() as serving:
            memory = serving.get(memory_id)
        if memory is None:
            _not_found(memory_id)
        return {"memory": memory}

    @blp.arguments(MemoryUpdateSchema)
    @blp.response(200, MemoryUpdatedSchema)
    def put(self, body, memory_id):
        """Change a memory

        Only the fields given change; `metadata` replaces the old metadata, and
        `expiresAt: null` makes the memory permanent.
        """
        changes = {
            "type": body.get("type"),
            "key": body.get("key"),
            "content": body.get("content"),
            "metadata": body.get("metadata"),
            "session_id": body.get("sessionId"),
        }
        changes = {name: value for name, value in changes.items() if value is not None}
        if "expiresAt" in body:
            changes["expires_at"] = to_iso(body["expiresAt"]) if body["expiresAt"] else None
        try:
            with _served() as serving:
                current = serving.get(memory_id)
                if current is None:
                    _not_found(memory_id)
                memory = serving.update(current, changes)
        except MemoryNotFound:
            _not_found(memory_id)
        except KeyConflict as exc:
            abort(409, message=str(exc), errors={"json": {"key": [str(exc)]}})
        return {"success": True, "memory": memory}

    @blp.response(200, SuccessSchema)
    def delete(self, memory_id):
        """Delete a memory"""
        with _served() as serving:
            deleted = serving.delete(memory_id)
        if not deleted:
            _not_found(memory_id)
        return {"success": True}


@blp.route("/<memory_id:memory_id>/history", parameters=MEMORY_ID)
class MemoryHistory(MethodView):
    @blp.response(200, HistorySchema)
    def get(self, memory_id):
        """List the changes of a memory

        One entry for each create, update and delete, oldest first; entries remain after
        the memory is deleted. The local store keeps history; a remote backend's memories
        have none here.
        """
        entries = services().memories.history(memory_id)
        if not entries:
            _not_found(memory_id)
        return {"data": entries}
