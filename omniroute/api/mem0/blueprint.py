"""mem0's platform routes, as `mem0ai` 2.2.1's MemoryClient calls them (docs/mem0.md).

Every route takes a gateway key as mem0 sends its own (`Authorization: Token <key>`; Bearer
too) and reaches that key's memories only, through the one way into memory the other faces
use (the primary backend, the end users of docs/scopes.md). Reading needs the key's
`read:memory` scope, writing `write:memory`, as over MCP. Errors come in mem0's shape:
`{"detail", "error", "details"}`, with 400 for what mem0 refuses as invalid.
"""

from __future__ import annotations

import dataclasses
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import date
from functools import partial
from http import HTTPStatus
from typing import Any

from flask import g, jsonify, request, url_for
from flask.views import MethodView
from flask_smorest import Blueprint
from werkzeug.exceptions import HTTPException

from omniroute.api.mem0 import schemas
from omniroute.api.mem0.adding import memories_to_add, messages_of
from omniroute.api.mem0.shapes import (
    IN_METADATA,
    BadInput,
    Entities,
    entities_of,
    history_json,
    memory_json,
)
from omniroute.core.clock import utc_now
from omniroute.core.errors import error_parts, keep_error_headers
from omniroute.core.keys import READ_MEMORY, WRITE_MEMORY
from omniroute.memory.backends.base import BackendError
from omniroute.memory.backends.serving import ServingMemories
from omniroute.memory.life.erase import erase_owner
from omniroute.memory.listing import end_users
from omniroute.memory.model import Memory, MemoryFilter
from omniroute.memory.store import MemoryNotFound
from omniroute.services import services
from omniroute.web.auth import gateway_key

blp = Blueprint("mem0", __name__, description="mem0's platform API, over the same memories")
# A body or query mem0 refuses is its 400 (flask-smorest's default is 422).
arguments = partial(blp.arguments, error_status_code=400)
ORGANISATION = "omniroute"  # what ping answers as mem0's org_id
SCANNED = 10_000  # memories read at most to filter by agent_id or app_id (kept in metadata)
SCAN_PAGE = 500
MEMORY_ID = [{"in": "path", "name": "memory_id", "schema": {"type": "string", "minLength": 1}}]
ENTITY_TYPES = ("user", "agent", "app", "run")
ENTITY = [
    {"in": "path", "name": "entity_type", "schema": {"type": "string", "enum": ENTITY_TYPES}},
    {"in": "path", "name": "entity_id", "schema": {"type": "string", "minLength": 1}},
]  # fmt: skip


class Mem0Error(HTTPException):
    """An answer in mem0's words: `detail`, and the field at fault when there is one."""

    def __init__(self, status: int, detail: str, field: str | None = None):
        super().__init__(detail)
        self.code = status
        self.data = {"message": detail}
        if field is not None:
            self.data["errors"] = {"json": {field: [detail.removeprefix(f"{field}: ")]}}


@blp.errorhandler(HTTPException)
def _answer_as_mem0(error: HTTPException):
    """Any refusal on these routes in mem0's shape: a 422 (the JSON edge's) is mem0's 400."""
    status, detail, details = error_parts(error)
    status = 400 if status == 422 else status
    phrase = HTTPStatus(status).phrase
    response = jsonify({"detail": detail, "error": f"{status} {phrase}", "details": details})
    response.status_code = status
    keep_error_headers(error, response)
    return response


@blp.before_request
def _authenticate() -> None:
    scheme, _, token = request.headers.get("Authorization", "").partition(" ")
    key = gateway_key(token.strip()) if scheme.lower() in ("token", "bearer") and token else None
    if key is None:
        raise Mem0Error(401, "Invalid API key: send 'Authorization: Token <gateway key>'.")
    g.api_key = key


def _allowed(scope: str) -> str:
    """The key's id, when it holds `scope` (403 otherwise)."""
    if scope not in g.api_key.scopes:
        raise Mem0Error(403, f"This API key lacks the {scope} scope.")
    return g.api_key.id


@contextmanager
def _served() -> Iterator[ServingMemories]:
    serving = services().serving
    try:
        yield serving
    except BadInput as exc:
        raise Mem0Error(400, f"{exc.field}: {exc}", exc.field) from None
    except BackendError as exc:
        raise Mem0Error(502, f"Memory backend {serving.serving_id()} failed: {exc}") from None


def _mine(serving: ServingMemories, memory_id: str) -> Memory:
    """The key's memory of this id (another key's, or a global one, is not found)."""
    memory = serving.get(memory_id)
    if memory is None or memory.api_key_id != g.api_key.id:
        raise Mem0Error(404, f"Memory {memory_id} not found.")
    return memory


def _expiry(day: date | None) -> str | None:
    if day is None:
        return None
    if day < utc_now().date():
        raise BadInput("expiration_date", "must not be in the past")
    return f"{day.isoformat()}T23:59:59.999Z"


@blp.route("/v1/ping/")
class Ping(MethodView):
    @blp.response(200, schemas.Mem0PingSchema)
    def get(self):
        """Check a gateway key, as mem0's client does when it starts

        mem0's client needs an organisation and a project: the gateway is the one, the key
        the other (its memories are the project's).
        """
        return {"status": "ok", "message": "pong", "org_id": ORGANISATION,
                "project_id": g.api_key.id, "user_email": None}  # fmt: skip


@blp.route("/v3/memories/add/")
class AddMemories(MethodView):
    @arguments(schemas.Mem0AddSchema)
    @blp.response(200, schemas.Mem0AddResultSchema)
    def post(self, body):
        """Add memories from messages

        With `infer` (the default) the gateway's own extraction finds the facts, as in a
        chat; without it each message is stored as given. Upserts: a fact's key, or the
        text itself, met again updates the memory. Done before the answer: `SUCCEEDED`.
        """
        owner = _allowed(WRITE_MEMORY)
        with _served() as serving:
            entities = entities_of(body, body.get("filters"))
            if not entities.named:
                raise BadInput("user_id", "one of user_id, agent_id, app_id or run_id is required")
            new = memories_to_add(
                owner,
                messages_of(body["messages"]),
                entities,
                infer=body["infer"],
                metadata=body.get("metadata") or {},
                expires_at=_expiry(body.get("expiration_date")),
            )
            added = [serving.create(memory) for memory in new]
        results = [
            {"id": memory.id, "memory": memory.content, "event": "ADD" if created else "UPDATE"}
            for memory, created in added
        ]
        return {
            "message": f"{len(results)} memories added or updated.",
            "status": "SUCCEEDED",
            "event_id": str(uuid.uuid4()),
            "results": results,
        }


@blp.route("/v3/memories/")
class ListMemories(MethodView):
    @arguments(schemas.Mem0ListSchema, required=False)
    @arguments(schemas.Mem0PageQuery, location="query")
    @blp.response(200, schemas.Mem0PageSchema)
    def post(self, body, page):
        """List memories, newest first, a page at a time

        Without `user_id`, every memory of the key, its end users' too.
        """
        owner = _allowed(READ_MEMORY)
        size, number = page["page_size"], page["page"]
        with _served() as serving:
            entities = entities_of(body, body.get("filters"))
            total, found = _page(serving, owner, entities, size, (number - 1) * size)
        return {
            "count": total,
            "next": _page_url(number + 1, size) if number * size < total else None,
            "previous": _page_url(number - 1, size) if number > 1 else None,
            "results": [memory_json(memory) for memory in found],
        }


def _filter_of(owner: str, entities: Entities) -> MemoryFilter:
    return MemoryFilter(
        api_key_id=owner,
        user_id=entities.user_id,
        session_id=entities.run_id,
        created_after=entities.created_after,
        created_before=entities.created_before,
    )


def _page(serving, owner: str, entities: Entities, limit: int, offset: int):
    """(how many match, this page of them); agent and app ids, kept in metadata, are
    matched here over at most SCANNED memories."""
    filters = _filter_of(owner, entities)
    if entities.agent_id is None and entities.app_id is None:
        listed = serving.listing(filters, limit=limit, offset=offset)
        return listed["total"], listed["data"]
    matched: list[Memory] = []
    for start in range(0, SCANNED, SCAN_PAGE):
        data = serving.listing(filters, limit=SCAN_PAGE, offset=start)["data"]
        matched += [memory for memory in data if entities.holds(memory)]
        if len(data) < SCAN_PAGE:
            break
    return len(matched), matched[offset : offset + limit]


def _page_url(number: int, size: int) -> str:
    return url_for("mem0.ListMemories", page=number, page_size=size, _external=True)


@blp.route("/v3/memories/search/")
class SearchMemories(MethodView):
    @arguments(schemas.Mem0SearchSchema)
    @blp.response(200, schemas.Mem0SearchResultSchema)
    def post(self, body):
        """Search memories by meaning and keywords

        Ranked as the gateway ranks a chat's memories, inside the end user's own memories
        (`user_id`), or else the key's shared ones; `run_id`, `agent_id` and `app_id` keep
        only theirs.
        """
        owner = _allowed(READ_MEMORY)
        with _served() as serving:
            entities = entities_of(body, body.get("filters"))
            strict = dataclasses.replace(entities, user_id=entities.user_id or "")
            found = serving.recall(
                owner, body["query"], max(4 * body["top_k"], 50),
                settings=services().memory_settings.get(), user_id=strict.user_id,
                session_id=strict.run_id,
            )  # fmt: skip
        threshold = body.get("threshold")
        results = []
        for memory in found.memories:
            score = found.scores.get(memory.id)
            if not strict.holds(memory) or (threshold and score is not None and score < threshold):
                continue
            results.append(memory_json(memory, score))
        return {"results": results[: body["top_k"]]}


@blp.route("/v1/memories/<memory_id>/", parameters=MEMORY_ID)
class MemoryItem(MethodView):
    @blp.response(200, schemas.Mem0MemorySchema)
    def get(self, memory_id):
        """Get one memory"""
        _allowed(READ_MEMORY)
        with _served() as serving:
            return memory_json(_mine(serving, memory_id))

    @arguments(schemas.Mem0UpdateSchema)
    @blp.response(200, schemas.Mem0MemorySchema)
    def put(self, body, memory_id):
        """Change a memory's text, metadata or expiration date"""
        _allowed(WRITE_MEMORY)
        changes: dict[str, Any] = {}
        if "text" in body:
            changes["content"] = body["text"]
        with _served() as serving:
            memory = _mine(serving, memory_id)
            if body.get("metadata") is not None:
                kept = {n: memory.metadata[n] for n in IN_METADATA if n in memory.metadata}
                changes["metadata"] = {**body["metadata"], **kept}
            if "expiration_date" in body:
                changes["expires_at"] = _expiry(body["expiration_date"])
            if not changes:
                raise BadInput("text", "name text, metadata or expiration_date to change")
            try:
                return memory_json(serving.update(memory, changes))
            except MemoryNotFound:
                raise Mem0Error(404, f"Memory {memory_id} not found.") from None

    @blp.response(200, schemas.Mem0MessageSchema)
    def delete(self, memory_id):
        """Delete a memory"""
        _allowed(WRITE_MEMORY)
        with _served() as serving:
            _mine(serving, memory_id)
            serving.delete(memory_id)
        return {"message": "Memory deleted successfully!"}


@blp.route("/v1/memories/<memory_id>/history/", parameters=MEMORY_ID)
class MemoryHistory(MethodView):
    @blp.response(200, schemas.Mem0HistoryEntrySchema(many=True))
    def get(self, memory_id):
        """List a memory's changes, oldest first (kept after it is deleted)"""
        _allowed(READ_MEMORY)
        entries = services().memories.history(memory_id)
        if not entries or entries[0]["api_key_id"] != g.api_key.id:
            raise Mem0Error(404, f"Memory {memory_id} not found.")
        with _served() as serving:
            current = serving.get(memory_id)
        user = current.user_id or None if current is not None else None
        return [history_json(entry, user) for entry in entries]


@blp.route("/v1/memories/")
class DeleteMemories(MethodView):
    @arguments(schemas.Mem0EntitiesQuery, location="query")
    @blp.response(200, schemas.Mem0MessageSchema)
    def delete(self, query):
        """Delete every memory of an end user, agent, app or run

        One of `user_id`, `agent_id`, `app_id` or `run_id` is required: never the whole key.
        """
        owner = _allowed(WRITE_MEMORY)
        with _served() as serving:
            _delete_all(serving, owner, entities_of(query))
        return {"message": "Memories deleted successfully!"}


def _delete_all(serving: ServingMemories, owner: str, entities: Entities) -> None:
    """Delete the memories of the entities named: never the whole key."""
    if not entities.named:
        raise BadInput("user_id", "one of user_id, agent_id, app_id or run_id is required")
    if entities.agent_id is None and entities.app_id is None:
        serving.clear(_filter_of(owner, entities), dry_run=False)
    else:
        for memory in _page(serving, owner, entities, SCANNED, 0)[1]:
            serving.delete(memory.id)


@blp.route("/v1/entities/")
class EntityList(MethodView):
    @blp.response(200, schemas.Mem0EntitiesSchema)
    def get(self):
        """List the key's end users who have memories (mem0's `users`)"""
        owner = _allowed(READ_MEMORY)
        return {
            "results": [
                {"id": user["user_id"], "name": user["user_id"], "type": "user",
                 "total_memories": user["memories"], "owner": owner,
                 "created_at": user["first"], "updated_at": user["last"]}
                for user in end_users(services().memories, owner)
            ]
        }  # fmt: skip


@blp.route("/v2/entities/<entity_type>/<entity_id>/", parameters=ENTITY)
class EntityItem(MethodView):
    @blp.response(200, schemas.Mem0MessageSchema)
    def delete(self, entity_type, entity_id):
        """Forget an end user, or delete a run's, agent's or app's memories

        A user (mem0's `delete_users`) is erased as `POST /api/memory/erase` erases one:
        memories, vectors, keyword rows, Qdrant points, history and waiting chat texts.
        """
        owner = _allowed(WRITE_MEMORY)
        with _served() as serving:
            if entity_type not in ENTITY_TYPES:
                raise BadInput("entity_type", f"must be one of {', '.join(ENTITY_TYPES)}")
            entities = entities_of({f"{entity_type}_id": entity_id})
            if entity_type == "user":
                erase_owner(services().memories, owner, entities.user_id)
            else:
                _delete_all(serving, owner, entities)
        return {"message": "Entity deleted successfully."}
