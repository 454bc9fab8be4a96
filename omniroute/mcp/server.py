"""The memory tools: the reference's search, add and clear, plus get, update and delete.

Each tool acts on one key's memories (see auth.py), and on one end user's among them when
`userId` names one (docs/scopes.md); a search also reads the global memories, which only the
admin may change. Failures come back as MCP tool errors with a clear message; the server
itself never crashes on bad input.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from datetime import datetime
from typing import Annotated, Any, Literal

import anyio
from mcp.server.auth.settings import AuthSettings
from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.types import ToolAnnotations
from pydantic import Field, ValidationError

from omniroute import __version__
from omniroute.core.clock import to_iso
from omniroute.core.keys import READ_MEMORY, WRITE_MEMORY
from omniroute.core.text_rules import UnstorableText
from omniroute.mcp.auth import Caller, GatewayTokenVerifier, current_caller
from omniroute.memory.backends.base import NewMemory
from omniroute.memory.model import MAX_USER_CHARS, MemoryFilter, user_id_problem
from omniroute.memory.search.budget import within_shares
from omniroute.memory.search.tokens import count_tokens
from omniroute.memory.store import KeyConflict, MemoryNotFound
from omniroute.services import Services

_TYPES = Literal["factual", "episodic", "procedural", "semantic"]
_TYPE_WORDS = (
    "factual: a stable fact or preference; episodic: a decision at a moment; "
    "procedural: how something is done; semantic: a summary or general knowledge."
)
MemoryType = Annotated[_TYPES, Field(description=_TYPE_WORDS)]
MaybeType = Annotated[_TYPES | None, Field(description=f"Only this type. {_TYPE_WORDS}")]
ApiKeyId = Annotated[
    str | None,
    Field(description="The gateway key whose memories to use; leave out to use your own."),
]
MemoryKey = Annotated[
    str,
    Field(
        min_length=1,
        max_length=256,
        description="What the memory is about, as `category:subject`, e.g. `preference:editor` "
        "or `decision:database`; one key holds one memory, so reusing it updates that memory.",
    ),
]
UserId = Annotated[
    str,
    Field(
        max_length=MAX_USER_CHARS,
        description="The end user of the key it is about (your application's id for the "
        "person); leave out for the key's shared memories.",
    ),
]
MemoryId = Annotated[str | None, Field(description="The memory's id (from search or add).")]
KeyRef = Annotated[
    str | None,
    Field(description="The memory's key, `category:subject`: give it instead of the id."),
]
Content = Annotated[
    str, Field(min_length=1, max_length=65_536, description="The fact itself, one sentence.")
]


def _memory(memory, score: float | None = None) -> dict[str, Any]:
    """What an agent needs of a memory, no bookkeeping: id, key, content, type, when it last
    changed, and its session, expiry and relevance score when it has them."""
    compact = {
        "id": memory.id,
        "key": memory.key,
        "content": memory.content,
        "type": memory.type,
        "updatedAt": memory.updated_at,
    }
    if memory.session_id:
        compact["sessionId"] = memory.session_id
    if memory.user_id:
        compact["userId"] = memory.user_id
    compact["scope"] = memory.scope
    if memory.expires_at:
        compact["expiresAt"] = memory.expires_at
    if score is not None:
        compact["score"] = round(score, 4)
    return compact


def checked_user(user_id: str) -> str:
    """An end user's id as given ('' for none), or a tool error saying what is wrong."""
    if user_id and (problem := user_id_problem(user_id)):
        raise ToolError(f"userId: {problem}")
    return user_id


class MemoryServer(MCPServer):
    """MCPServer whose argument errors read as one plain sentence per field
    ("type: Input should be 'factual', ..."), not pydantic's dump with a link."""

    async def call_tool(self, name, arguments, context=None):
        try:
            return await super().call_tool(name, arguments, context)
        except ToolError as exc:
            if isinstance(exc.__cause__, ValidationError):
                raise ToolError(plain_errors(exc.__cause__)) from None
            raise


def plain_errors(error: ValidationError) -> str:
    """`field: message` for each problem, joined into sentences."""
    parts = []
    for problem in error.errors(include_url=False):
        field = ".".join(str(part) for part in problem["loc"]) or "arguments"
        parts.append(f"{field}: {problem['msg'].rstrip('.')}.")
    return " ".join(parts)


def build_server(
    svc: Services,
    config: Mapping[str, Any],
    *,
    base_url: str,
    stdio_caller: Caller | None = None,
) -> MCPServer:
    """The MCP server for one app: `config` is the app's (for the admin token)."""
    server = MemoryServer(
        "omniroute-memory",
        title="OmniRoute Memory",
        version=__version__,
        instructions="Search, add, correct and clear the memories of your OmniRoute key.",
        token_verifier=GatewayTokenVerifier(
            config["OMNIROUTE_ADMIN_TOKEN"], svc.keys, svc.guess_brake
        ),
        auth=AuthSettings(
            issuer_url=base_url,
            resource_server_url=f"{base_url}/mcp",
            validate_token_resource=False,
        ),
    )

    async def run(work: Callable[[], Any]) -> Any:
        try:
            return await anyio.to_thread.run_sync(work)
        except UnstorableText as exc:
            raise ToolError(str(exc)) from None

    memories = svc.serving  # the local store, or the primary backend and its fallbacks

    def owned(caller: Caller, memory_id: str, *, writing: bool):
        """The caller's memory of this id; a global one to read, or (the admin) to change."""
        memory = memories.get(memory_id)
        if memory is None or (
            caller.api_key_id and memory.api_key_id not in (caller.api_key_id, "")
        ):
            raise ToolError(f"Memory {memory_id} not found.")
        if writing and caller.api_key_id and memory.scope == "global":
            raise ToolError(f"Memory {memory_id} is global: only the admin changes it.")
        return memory

    def referred(
        caller: Caller,
        memory_id: str | None,
        key: str | None,
        api_key_id: str | None,
        user_id: str,
        *,
        writing: bool = False,
    ):
        """The memory an id or a key (of the caller's, or the named key's, and of the end
        user when named) refers to."""
        if (memory_id is None) == (key is None):
            raise ToolError("Give the memory's id or its key (one of them).")
        if memory_id is not None:
            return owned(caller, memory_id, writing=writing)
        memory = memories.get_by_key(caller.owner(api_key_id), key, checked_user(user_id))
        if memory is None:
            raise ToolError(f"No memory has the key {key!r}.")
        return memory

    @server.tool(
        name="omniroute_memory_search",
        title="Search memories",
        annotations=ToolAnnotations(read_only_hint=True, open_world_hint=False),
    )
    async def search(
        apiKeyId: ApiKeyId = None,
        query: Annotated[
            str | None,
            Field(description="What you want to recall, in plain words; leave out for the newest."),
        ] = None,
        type: MaybeType = None,
        maxTokens: Annotated[
            int | None, Field(ge=1, le=8000, description="Token budget of the answer.")
        ] = None,
        limit: Annotated[int | None, Field(ge=1, le=100, description="At most this many.")] = None,
        userId: UserId = "",
    ) -> dict[str, Any]:
        """Find the memories that matter for a query (the gateway's own retrieval), or the
        newest ones without a query: as a chat of the key (and of the end user `userId`)
        sees them, global memories included. The type filter and the limit apply before the
        budget."""
        owner = current_caller(stdio_caller, READ_MEMORY).owner(apiKeyId)
        user_id = checked_user(userId)

        def work():
            settings = svc.memory_settings.get()
            budget = maxTokens or settings.max_tokens or 2000
            share = settings.global_budget_percent
            # The same retrieval, with the same settings, as the proxy.
            found = memories.recall(
                owner, query, 100, max_tokens=budget, settings=settings, user_id=user_id,
                include_global=share > 0,
            )  # fmt: skip
            kept = [memory for memory in found.memories if not type or memory.type == type]
            return within_shares(kept[: limit or 100], budget, share), found.scores

        taken, scores = await run(work)
        return {
            "success": True,
            "data": {
                "memories": [_memory(m, scores.get(m.id)) for m in taken],
                "count": len(taken),
                "totalTokens": sum(count_tokens(m.content) for m in taken),
            },
        }

    @server.tool(
        name="omniroute_memory_add",
        title="Remember a fact",
        annotations=ToolAnnotations(idempotent_hint=True, destructive_hint=False),
    )
    async def add(
        key: MemoryKey,
        content: Content,
        type: MemoryType = "factual",
        apiKeyId: ApiKeyId = None,
        sessionId: Annotated[
            str, Field(description="A conversation to tie it to; empty: the whole key.")
        ] = "",
        metadata: Annotated[
            dict[str, Any] | None, Field(description="Any JSON object to keep with it.")
        ] = None,
        userId: UserId = "",
    ) -> dict[str, Any]:
        """Remember a fact, for the key or for one of its end users (`userId`); a key the
        owner (that user) already uses is updated (metadata merged)."""
        owner = current_caller(stdio_caller, WRITE_MEMORY).owner(apiKeyId)
        if not content.strip() or not key.strip():
            raise ToolError("key and content must not be blank.")
        new = NewMemory(
            api_key_id=owner,
            key=key,
            content=content,
            type=type,
            session_id=sessionId,
            metadata=metadata or {},
            user_id=checked_user(userId),
        )
        memory, created = await run(lambda: memories.create(new))
        message = "Memory created." if created else "Memory with this key updated."
        return {"success": True, "data": {"memory": _memory(memory), "message": message}}

    @server.tool(
        name="omniroute_memory_get",
        title="Read a memory",
        annotations=ToolAnnotations(read_only_hint=True, open_world_hint=False),
    )
    async def get(
        id: MemoryId = None, key: KeyRef = None, apiKeyId: ApiKeyId = None, userId: UserId = ""
    ) -> dict[str, Any]:
        """Read one memory, by its id or its key (the end user's, when `userId` is given)."""
        caller = current_caller(stdio_caller, READ_MEMORY)
        memory = await run(lambda: referred(caller, id, key, apiKeyId, userId))
        return {"success": True, "data": {"memory": _memory(memory)}}

    @server.tool(
        name="omniroute_memory_update",
        title="Correct a memory",
        annotations=ToolAnnotations(idempotent_hint=True, destructive_hint=False),
    )
    async def update(
        id: MemoryId = None,
        key: KeyRef = None,
        apiKeyId: ApiKeyId = None,
        content: Annotated[
            str | None, Field(min_length=1, max_length=65_536, description="The new text.")
        ] = None,
        newKey: Annotated[
            str | None,
            Field(min_length=1, max_length=256, description="A new key, `category:subject`."),
        ] = None,
        type: Annotated[_TYPES | None, Field(description=f"The new type. {_TYPE_WORDS}")] = None,
        metadata: Annotated[
            dict[str, Any] | None, Field(description="Replaces the memory's metadata.")
        ] = None,
        expiresAt: Annotated[
            datetime | None, Field(description="ISO-8601: when to forget it.")
        ] = None,
        userId: UserId = "",
    ) -> dict[str, Any]:
        """Correct a memory, found by its id or its key: only the fields given change."""
        caller = current_caller(stdio_caller, WRITE_MEMORY)
        changes = {
            name: value
            for name, value in {
                "content": content,
                "key": newKey,
                "type": type,
                "metadata": metadata,
            }.items()
            if value is not None
        }
        if expiresAt is not None:
            changes["expires_at"] = to_iso(expiresAt)
        if not changes:
            raise ToolError("Give at least one field to change.")

        def work():
            memory = referred(caller, id, key, apiKeyId, userId, writing=True)
            return memories.update(memory, changes)

        try:
            memory = await run(work)
        except (MemoryNotFound, KeyConflict) as exc:
            raise ToolError(str(exc) or "Memory not found.") from None
        return {"success": True, "data": {"memory": _memory(memory)}}

    @server.tool(
        name="omniroute_memory_delete",
        title="Forget a memory",
        annotations=ToolAnnotations(destructive_hint=True, idempotent_hint=True),
    )
    async def delete(
        id: MemoryId = None, key: KeyRef = None, apiKeyId: ApiKeyId = None, userId: UserId = ""
    ) -> dict[str, Any]:
        """Forget one memory, by its id or its key (the end user's, when `userId` is given)."""
        caller = current_caller(stdio_caller, WRITE_MEMORY)

        def work():
            memory = referred(caller, id, key, apiKeyId, userId, writing=True)
            memories.delete(memory.id)
            return memory

        memory = await run(work)
        return {"success": True, "data": {"message": f"Memory {memory.key} deleted."}}

    @server.tool(
        name="omniroute_memory_clear",
        title="Forget many memories",
        annotations=ToolAnnotations(destructive_hint=True, idempotent_hint=True),
    )
    async def clear(
        apiKeyId: ApiKeyId = None,
        type: MaybeType = None,
        sessionId: Annotated[str | None, Field(description="Only this session's.")] = None,
        olderThan: Annotated[
            datetime | None, Field(description="ISO-8601: only memories created before it.")
        ] = None,
        dryRun: Annotated[bool, Field(description="Count what would go; delete nothing.")] = False,
        userId: Annotated[
            str, Field(max_length=MAX_USER_CHARS, description="Only this end user's memories.")
        ] = "",
    ) -> dict[str, Any]:
        """Forget every memory of the key that matches the filters, all of them. With no
        filter it deletes EVERY memory of the key (of every end user): try dryRun first."""
        owner = current_caller(stdio_caller, WRITE_MEMORY).owner(apiKeyId)
        doomed = MemoryFilter(
            api_key_id=owner,
            type=type,
            session_id=sessionId,
            user_id=checked_user(userId) or None,
            created_before=to_iso(olderThan) if olderThan else None,
        )
        count = await run(lambda: memories.clear(doomed, dry_run=dryRun))
        message = f"Would delete {count} memories." if dryRun else f"Deleted {count} memories."
        return {
            "success": True,
            "data": {
                "deletedCount": 0 if dryRun else count,
                "matched": count,
                "dryRun": dryRun,
                "message": message,
            },
        }

    return server
