"""The MCP tools with a remote primary: an agent's memories live in the backend that serves,
through the official MCP client over streamable HTTP."""

from __future__ import annotations

import pytest
from prometheus_client import REGISTRY

from omniroute.memory.model import MemoryFilter
from tests.helpers import run_async
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

    run_async(work)
    assert [m["apiKeyId"] for m in memory_service.memories.values()] == ["bob"]
    assert svc.memories.find(MemoryFilter(api_key_id=key.id)) == [], "nothing went local"


def test_a_leaky_primary_never_shows_or_deletes_another_keys_memories(
    gateway, gateway_app, memory_service
):
    """A service that answers every key's memories to a list or search for one: the MCP
    tools and the REST API see and delete only the caller's, and the drops are counted."""
    svc = gateway_app.extensions["omniroute"]
    svc.memory_settings.update(
        {"backendConfigs": {"brain": {"baseUrl": memory_service.url}}, "primaryBackend": "brain"}
    )
    memory_service.leaky = True
    key, secret = svc.keys.create("alice")
    memory_service.add(apiKeyId=key.id, key="fact:city", content="Alice lives in Porto")
    for n in range(120):  # more than a page of another key's memories before bob's last one
        memory_service.add(apiKeyId="bob", key=f"fact:{n}", content=f"Bob fact {n} Porto")
    memory_service.add(apiKeyId=key.id, key="fact:pet", content="Alice has a cat")
    dropped = _foreign("brain")

    async def work():
        async with http_session(gateway.url, secret) as session:
            _, newest = await call(session, "omniroute_memory_search")
            shown = newest["data"]["memories"]  # one page of the service's: alice's first only
            assert [m["key"] for m in shown] == ["fact:city"]
            _, found = await call(session, "omniroute_memory_search", query="Porto")
            assert [m["key"] for m in found["data"]["memories"]] == ["fact:city"]
            error, got = await call(session, "omniroute_memory_get", key="fact:0")
            assert error and "No memory" in got
            _, cleared = await call(session, "omniroute_memory_clear")
            assert cleared["data"]["deletedCount"] == 2

    run_async(work)
    assert {m["apiKeyId"] for m in memory_service.memories.values()} == {"bob"}
    assert len(memory_service.memories) == 120
    assert _foreign("brain") > dropped


def test_a_leaky_primary_is_cleared_by_key_through_rest_without_touching_others(
    client, admin, svc, memory_service
):
    svc.memory_settings.update(
        {"backendConfigs": {"brain": {"baseUrl": memory_service.url}}, "primaryBackend": "brain"}
    )
    memory_service.leaky = True
    key, _ = svc.keys.create("alice")
    memory_service.add(apiKeyId=key.id, key="fact:city", content="Alice lives in Porto")
    memory_service.add(apiKeyId="bob", key="fact:city", content="Bob lives in Oslo")
    listed = client.get(f"/api/memory?apiKeyId={key.id}", headers=admin).json
    assert [m["content"] for m in listed["data"]] == ["Alice lives in Porto"]
    cleared = client.delete(f"/api/memory?apiKeyId={key.id}", headers=admin)
    assert cleared.status_code == 200, cleared.json
    assert [m["apiKeyId"] for m in memory_service.memories.values()] == ["bob"]


def _foreign(backend: str) -> float:
    return (
        REGISTRY.get_sample_value("omniroute_backend_foreign_memories_total", {"backend": backend})
        or 0.0
    )
