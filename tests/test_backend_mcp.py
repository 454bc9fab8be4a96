"""The MCP tools with a remote primary: an agent's memories live in the backend that serves,
through the official MCP client over streamable HTTP."""

from __future__ import annotations

import anyio
import pytest

from omniroute.memory.model import MemoryFilter
from tests.mcp_client import call, http_session

pytestmark = pytest.mark.both_stores


def test_an_agent_manages_its_memories_in_the_primary_backend(gateway, gateway_app, memory_service):
    svc = gateway_app.extensions["omniroute"]
    svc.memory_settings.update(
        {"backendConfigs": {"brain": {"baseUrl": memory_service.url}}, "primaryBackend": "brain"}
    )
    key, secret = svc.keys.create("alice")
    memory_service.add(apiKeyId="bob", key="preference:editor", content="Bob's")

    async def work():
        async with http_session(gateway.url, secret) as session:
            error, added = await call(
                session, "omniroute_memory_add", key="preference:editor", content="I prefer Vim"
            )
            assert not error and added["data"]["message"] == "Memory created."
            _, again = await call(
                session, "omniroute_memory_add", key="preference:editor", content="I prefer Vim!"
            )
            assert again["data"]["message"] == "Memory with this key updated."
            _, got = await call(session, "omniroute_memory_get", key="preference:editor")
            assert got["data"]["memory"]["content"] == "I prefer Vim!"
            _, fixed = await call(
                session, "omniroute_memory_update", key="preference:editor", content="Helix"
            )
            assert fixed["data"]["memory"]["content"] == "Helix"
            _, found = await call(session, "omniroute_memory_search", query="helix")
            assert [m["content"] for m in found["data"]["memories"]] == ["Helix"]
            _, newest = await call(session, "omniroute_memory_search")
            assert [m["content"] for m in newest["data"]["memories"]] == ["Helix"]
            _, dry = await call(session, "omniroute_memory_clear", dryRun=True)
            assert dry["data"]["matched"] == 1
            _, cleared = await call(session, "omniroute_memory_clear")
            assert cleared["data"]["deletedCount"] == 1

    anyio.run(work)
    assert [m["apiKeyId"] for m in memory_service.memories.values()] == ["bob"]
    assert svc.memories.find(MemoryFilter(api_key_id=key.id)) == [], "nothing went local"
