"""MCP scopes: `read:memory` for search and get, `write:memory` for the writing tools, over
streamable HTTP and stdio alike, through the official MCP client."""

from __future__ import annotations

import pytest
from mcp import ClientSession
from mcp.client.stdio import stdio_client

from omniroute.memory.model import MemoryFilter
from tests.helpers import run_async
from tests.mcp_client import call, http_session
from tests.test_mcp import stdio_parameters

pytestmark = pytest.mark.both_stores


def run(work):
    return run_async(work)


def _filter(owner):
    return MemoryFilter(api_key_id=owner)


def test_a_read_only_key_may_search_and_get_but_not_write(gateway, gateway_app):
    svc = gateway_app.extensions["omniroute"]
    reader, secret = svc.keys.create("dashboard bot", scopes=["read:memory"])
    svc.memories.create(api_key_id=reader.id, key="preference:editor", content="Vim")
    writes = {
        "omniroute_memory_add": {"key": "k", "content": "x"},
        "omniroute_memory_update": {"key": "preference:editor", "content": "Helix"},
        "omniroute_memory_delete": {"key": "preference:editor"},
        "omniroute_memory_clear": {},
    }

    async def work():
        async with http_session(gateway.url, secret) as session:
            _, found = await call(session, "omniroute_memory_search", query="editor")
            assert [m["content"] for m in found["data"]["memories"]] == ["Vim"]
            _, got = await call(session, "omniroute_memory_get", key="preference:editor")
            assert got["data"]["memory"]["content"] == "Vim"
            for tool, arguments in writes.items():
                error, text = await call(session, tool, **arguments)
                assert error and "lacks the write:memory scope" in text, tool

    run(work)
    assert [m.content for m in svc.memories.find(_filter(reader.id))] == ["Vim"]
    svc.keys.set_scopes(reader.id, ["read:memory", "write:memory"])

    async def granted():
        async with http_session(gateway.url, secret) as session:
            error, _ = await call(session, "omniroute_memory_add", key="k", content="now")
            assert not error

    run(granted)


def test_a_key_without_scopes_may_not_read_either(gateway, gateway_app):
    svc = gateway_app.extensions["omniroute"]
    _, secret = svc.keys.create("chat only", scopes=[])

    async def work():
        async with http_session(gateway.url, secret) as session:
            error, text = await call(session, "omniroute_memory_search", query="x")
            assert error and "lacks the read:memory scope" in text

    run(work)


@pytest.mark.slow
def test_a_read_only_key_is_held_to_it_over_stdio(gateway_app, tmp_path, database_url):
    svc = gateway_app.extensions["omniroute"]
    reader, secret = svc.keys.create("recall bot", scopes=["read:memory"])

    async def work():
        async with stdio_client(stdio_parameters(tmp_path, secret, database_url)) as streams:
            async with ClientSession(*streams) as session:
                await session.initialize()
                error, _ = await call(session, "omniroute_memory_search", query="x")
                assert not error
                error, text = await call(session, "omniroute_memory_add", key="k", content="c")
                assert error and "lacks the write:memory scope" in text

    run(work)
    assert svc.memories.find(_filter(reader.id)) == []
