"""The memory tools: the reference's search, add and clear, plus get, update and delete.

Each tool acts on one key's memories (see auth.py). Failures come back as MCP tool errors
with a clear message; the server itself never crashes on bad input.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from datetime import datetime
from typing import Annotated, Any, Literal

import anyio
from mcp.server.auth.settings import AuthSettings
from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from pydantic import Field

from ..clock import to_iso
from ..memory import bulk
from ..memory.budget import within_budget
from ..memory.model import MemoryFilter, estimate_tokens
from ..memory.schemas import MemorySchema
from ..memory.store import KeyConflict, MemoryNotFound
from ..services import Services
from ..text_rules import UnstorableText
from .auth import Caller, GatewayTokenVerifier, current_caller

MemoryType = Literal["factual", "episodic", "procedural", "semantic"]
ApiKeyId = Annotated[
    str | None, Field(description="The key whose memories to use; leave out to use your own.")
]
_DUMP = MemorySchema()


def _memory(memory) -> dict[str, Any]:
    return _DUMP.dump(memory)


def build_server(
    svc: Services,
    config: Mapping[str, Any],
    *,
    base_url: str,
    stdio_caller: Caller | None = None,
) -> MCPServer:
    """The MCP server for one app: `config` is the app's (for the admin token)."""
    server = MCPServer(
        "omniroute-memory",
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

    def owned(caller: Caller, memory_id: str):
        memory = svc.memories.get(memory_id)
        if memory is None or (caller.api_key_id and memory.api_key_id != caller.api_key_id):
            raise ToolError(f"Memory {memory_id} not found.")
        return memory

    @server.tool(name="omniroute_memory_search")
    async def search(
        apiKeyId: ApiKeyId = None,
        query: str | None = None,
        type: MemoryType | None = None,
        maxTokens: Annotated[int, Field(ge=1, le=8000)] | None = None,
        limit: Annotated[int, Field(ge=1, le=100)] | None = None,
    ) -> dict[str, Any]:
        """Find the memories that matter for a query (the gateway's own retrieval), or the
        newest ones without a query. The type filter and the limit apply before the budget."""
        owner = current_caller(stdio_caller).owner(apiKeyId)

        def work():
            settings = svc.memory_settings.get()
            budget = maxTokens or settings["maxTokens"] or 2000
            if query and query.strip():
                # The same retriever, with the same settings, as the proxy.
                ranking = svc.retriever.rank(api_key_id=owner, query=query, settings=settings)
                found = [item.memory for item in ranking.items]
            else:
                found = svc.memories.find(MemoryFilter(api_key_id=owner), limit=100)
            if type:
                found = [memory for memory in found if memory.type == type]
            return within_budget(found[: limit or 100], budget)

        memories = await run(work)
        return {
            "success": True,
            "data": {
                "memories": [_memory(m) for m in memories],
                "count": len(memories),
                "totalTokens": sum(estimate_tokens(m.content) for m in memories),
            },
        }

    @server.tool(name="omniroute_memory_add")
    async def add(
        key: Annotated[str, Field(min_length=1, max_length=256)],
        content: Annotated[str, Field(min_length=1, max_length=65_536)],
        type: MemoryType = "factual",
        apiKeyId: ApiKeyId = None,
        sessionId: str = "",
        metadata: dict[str, Any] | None = None,
    ) -> dict[str, Any]:
        """Remember a fact; a key the owner already uses is updated (metadata merged)."""
        owner = current_caller(stdio_caller).owner(apiKeyId)
        if not content.strip() or not key.strip():
            raise ToolError("key and content must not be blank.")
        memory, created = await run(
            lambda: svc.memories.create(
                api_key_id=owner,
                key=key,
                content=content,
                type=type,
                session_id=sessionId,
                metadata=metadata or {},
            )
        )
        message = "Memory created." if created else "Memory with this key updated."
        return {"success": True, "data": {"memory": _memory(memory), "message": message}}

    @server.tool(name="omniroute_memory_get")
    async def get(id: str) -> dict[str, Any]:
        """Read one memory by id."""
        caller = current_caller(stdio_caller)
        memory = await run(lambda: owned(caller, id))
        return {"success": True, "data": {"memory": _memory(memory)}}

    @server.tool(name="omniroute_memory_update")
    async def update(
        id: str,
        content: Annotated[str, Field(min_length=1, max_length=65_536)] | None = None,
        key: Annotated[str, Field(min_length=1, max_length=256)] | None = None,
        type: MemoryType | None = None,
        metadata: dict[str, Any] | None = None,
        expiresAt: datetime | None = None,
    ) -> dict[str, Any]:
        """Correct a memory: only the fields given change (metadata is replaced)."""
        caller = current_caller(stdio_caller)
        changes = {
            name: value
            for name, value in {
                "content": content,
                "key": key,
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
            owned(caller, id)
            return svc.memories.update(id, **changes)

        try:
            memory = await run(work)
        except (MemoryNotFound, KeyConflict) as exc:
            raise ToolError(str(exc) or f"Memory {id} not found.") from None
        return {"success": True, "data": {"memory": _memory(memory)}}

    @server.tool(name="omniroute_memory_delete")
    async def delete(id: str) -> dict[str, Any]:
        """Forget one memory by id."""
        caller = current_caller(stdio_caller)
        await run(lambda: owned(caller, id) and svc.memories.delete(id))
        return {"success": True, "data": {"message": f"Memory {id} deleted."}}

    @server.tool(name="omniroute_memory_clear")
    async def clear(
        apiKeyId: ApiKeyId = None,
        type: MemoryType | None = None,
        sessionId: Annotated[str | None, Field(description="Only this session's.")] = None,
        olderThan: Annotated[
            datetime | None, Field(description="ISO-8601: only memories created before it.")
        ] = None,
        dryRun: Annotated[bool, Field(description="Count what would go; delete nothing.")] = False,
    ) -> dict[str, Any]:
        """Forget every memory of the key that matches (all of them, not only the first 50)."""
        owner = current_caller(stdio_caller).owner(apiKeyId)
        doomed = MemoryFilter(
            api_key_id=owner,
            type=type,
            session_id=sessionId,
            created_before=to_iso(olderThan) if olderThan else None,
        )
        count = await run(lambda: bulk.clear(svc.memories, doomed, dry_run=dryRun))
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
