"""The MCP server through the official MCP client, over streamable HTTP and stdio."""

from __future__ import annotations

import subprocess
import sys
import time
from datetime import UTC, datetime
from pathlib import Path

import httpx
import httpx2
import pytest
from mcp import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client
from mcp.client.streamable_http import streamable_http_client

import omniroute
from omniroute.memory.model import MemoryFilter
from tests.helpers import ADMIN_TOKEN, environment, run_async
from tests.mcp_client import call, http_session

pytestmark = pytest.mark.both_stores

ROOT = Path(__file__).resolve().parent.parent
TOOLS = {
    "omniroute_memory_search",
    "omniroute_memory_add",
    "omniroute_memory_get",
    "omniroute_memory_update",
    "omniroute_memory_delete",
    "omniroute_memory_clear",
}


@pytest.fixture
def keys(gateway_app):
    svc = gateway_app.extensions["omniroute"]
    alice, alice_secret = svc.keys.create("alice")
    bob, bob_secret = svc.keys.create("bob")
    return {"alice": (alice.id, alice_secret), "bob": (bob.id, bob_secret)}


def run(work):
    return run_async(work)


def test_text_no_database_can_store_is_a_tool_error_and_nothing_is_stored(
    gateway, gateway_app, keys
):
    alice_id, secret = keys["alice"]

    async def work():
        async with http_session(gateway.url, secret) as session:
            error, text = await call(session, "omniroute_memory_add", key="k", content="a\u0000b")
            assert error and "content" in text and "NUL" in text
            error, text = await call(
                session, "omniroute_memory_add", key="k", content="ok", metadata={"n": "\u0000"}
            )
            assert error and "metadata.n" in text

    run(work)
    assert gateway_app.extensions["omniroute"].memories.find(_filter(alice_id)) == []


def test_a_key_lists_the_tools_and_manages_its_memories(gateway, keys, gateway_app):
    svc = gateway_app.extensions["omniroute"]
    alice_id, secret = keys["alice"]

    async def work():
        async with http_session(gateway.url, secret) as session:
            assert {tool.name for tool in (await session.list_tools()).tools} == TOOLS
            error, added = await call(
                session, "omniroute_memory_add", key="pref:lang", content="I prefer TypeScript"
            )
            assert not error and set(added["data"]["memory"]) == {
                "id",
                "key",
                "content",
                "type",
                "updatedAt",
                "scope",
            }, "compact: no bookkeeping fields"
            memory_id = added["data"]["memory"]["id"]
            assert svc.memories.get(memory_id).api_key_id == alice_id
            _, found = await call(session, "omniroute_memory_search", query="TypeScript")
            assert [m["id"] for m in found["data"]["memories"]] == [memory_id]
            assert "score" in found["data"]["memories"][0], "the relevance of a search hit"
            _, newest = await call(session, "omniroute_memory_search")
            assert newest["data"]["count"] == 1
            _, got = await call(session, "omniroute_memory_get", id=memory_id)
            assert got["data"]["memory"]["content"] == "I prefer TypeScript"
            _, fixed = await call(
                session, "omniroute_memory_update", id=memory_id, content="I prefer Rust"
            )
            assert fixed["data"]["memory"]["content"] == "I prefer Rust"
            error, _ = await call(session, "omniroute_memory_delete", id=memory_id)
            assert not error
            error, text = await call(session, "omniroute_memory_get", id=memory_id)
            assert error and "not found" in text

    run(work)


def test_clear_deletes_every_match_not_only_fifty(gateway, keys, gateway_app):
    alice_id, secret = keys["alice"]
    svc = gateway_app.extensions["omniroute"]
    for number in range(60):
        svc.memories.create(api_key_id=alice_id, key=f"k{number}", content=f"fact {number}")
    svc.memories.create(api_key_id=alice_id, key="p", content="a procedure", type="procedural")

    async def work():
        async with http_session(gateway.url, secret) as session:
            _, dry = await call(session, "omniroute_memory_clear", type="factual", dryRun=True)
            assert dry["data"] == {
                "deletedCount": 0,
                "matched": 60,
                "dryRun": True,
                "message": "Would delete 60 memories.",
            }
            _, result = await call(session, "omniroute_memory_clear", type="factual")
            assert result == {
                "success": True,
                "data": {
                    "deletedCount": 60,
                    "matched": 60,
                    "dryRun": False,
                    "message": "Deleted 60 memories.",
                },
            }
            _, rest = await call(session, "omniroute_memory_search")
            assert [m["key"] for m in rest["data"]["memories"]] == ["p"]
            _, future = await call(session, "omniroute_memory_clear", olderThan="2000-01-01")
            assert future["data"]["deletedCount"] == 0

    run(work)


def test_clear_older_than_finds_old_memories_behind_many_new_ones(
    gateway, keys, gateway_app, monkeypatch
):
    # Regression: clearing looked only at the newest 500, so 3 old memories behind 500 newer
    # ones were never deleted.
    alice_id, secret = keys["alice"]
    svc = gateway_app.extensions["omniroute"]
    with monkeypatch.context() as patch:
        patch.setattr(svc.memories, "clock", lambda: datetime(2025, 1, 1, tzinfo=UTC))
        for number in range(3):
            svc.memories.create(api_key_id=alice_id, key=f"old{number}", content="old fact")
    for number in range(500):
        svc.memories.create(api_key_id=alice_id, key=f"new{number}", content="new fact")

    async def work():
        async with http_session(gateway.url, secret) as session:
            _, result = await call(session, "omniroute_memory_clear", olderThan="2026-01-01")
            assert result["data"]["deletedCount"] == 3

    run(work)
    left = svc.memories.find(MemoryFilter(api_key_id=alice_id), limit=1000)
    assert len(left) == 500 and all(m.key.startswith("new") for m in left)


def test_an_agent_gets_updates_and_deletes_a_memory_by_its_key(gateway, keys, gateway_app):
    alice_id, secret = keys["alice"]
    svc = gateway_app.extensions["omniroute"]
    svc.memories.create(api_key_id=keys["bob"][0], key="preference:editor", content="Bob's")

    async def work():
        async with http_session(gateway.url, secret) as session:
            await call(session, "omniroute_memory_add", key="preference:editor", content="Vim")
            _, got = await call(session, "omniroute_memory_get", key="preference:editor")
            assert got["data"]["memory"]["content"] == "Vim"
            _, fixed = await call(
                session, "omniroute_memory_update", key="preference:editor", content="Helix"
            )
            assert fixed["data"]["memory"]["content"] == "Helix"
            _, renamed = await call(
                session, "omniroute_memory_update", key="preference:editor",
                newKey="preference:text_editor",
            )  # fmt: skip
            assert renamed["data"]["memory"]["key"] == "preference:text_editor"
            error, text = await call(session, "omniroute_memory_get", key="preference:editor")
            assert error and "No memory has the key 'preference:editor'" in text
            error, text = await call(session, "omniroute_memory_get")
            assert error and "id or its key" in text
            error, text = await call(session, "omniroute_memory_get", id="x", key="y")
            assert error and "id or its key" in text
            _, done = await call(session, "omniroute_memory_delete", key="preference:text_editor")
            assert done["data"]["message"] == "Memory preference:text_editor deleted."

    run(work)
    assert svc.memories.find(MemoryFilter(api_key_id=alice_id)) == []
    bobs = svc.memories.find(MemoryFilter(api_key_id=keys["bob"][0]))
    assert [m.content for m in bobs] == ["Bob's"], "a key reaches only its own"


def test_the_tools_describe_themselves_and_the_server_its_version(gateway, keys):
    async def work():
        async with http_session(gateway.url, keys["alice"][1]) as session:
            return {tool.name: tool for tool in (await session.list_tools()).tools}

    tools = run(work)
    hints = {
        name: (t.annotations.read_only_hint, t.annotations.destructive_hint)
        for name, t in tools.items()
    }
    assert hints["omniroute_memory_search"][0] is True
    assert hints["omniroute_memory_get"][0] is True
    assert hints["omniroute_memory_delete"][1] is True
    assert hints["omniroute_memory_clear"][1] is True
    assert hints["omniroute_memory_add"][1] is False
    assert all(tool.title for tool in tools.values())
    assert "EVERY memory" in tools["omniroute_memory_clear"].description
    for tool in tools.values():
        for name, schema in tool.input_schema["properties"].items():
            assert schema.get("description"), f"{tool.name}.{name}"
    key = tools["omniroute_memory_add"].input_schema["properties"]["key"]["description"]
    assert "category:subject" in key


def test_the_server_reports_its_version(gateway, keys):
    async def work():
        async with httpx2.AsyncClient(
            headers={"Authorization": f"Bearer {keys['alice'][1]}"}
        ) as http:
            async with streamable_http_client(f"{gateway.url}/mcp", http_client=http) as streams:
                async with ClientSession(streams[0], streams[1]) as session:
                    return await session.initialize()

    result = run(work)
    assert result.server_info.name == "omniroute-memory"
    assert result.server_info.version == omniroute.__version__
    pyproject = (Path(__file__).resolve().parent.parent / "pyproject.toml").read_text()
    assert f'version = "{omniroute.__version__}"' in pyproject


def test_one_key_cannot_reach_another_keys_memories(gateway, keys, gateway_app):
    alice_id, _ = keys["alice"]
    svc = gateway_app.extensions["omniroute"]
    memory, _ = svc.memories.create(api_key_id=alice_id, key="secret", content="Alice's secret")

    async def work():
        async with http_session(gateway.url, keys["bob"][1]) as session:
            for tool, arguments in [
                ("omniroute_memory_get", {"id": memory.id}),
                ("omniroute_memory_update", {"id": memory.id, "content": "hacked"}),
                ("omniroute_memory_delete", {"id": memory.id}),
                ("omniroute_memory_search", {"apiKeyId": alice_id}),
                ("omniroute_memory_clear", {"apiKeyId": alice_id}),
            ]:
                error, text = await call(session, tool, **arguments)
                assert error, tool
            _, found = await call(session, "omniroute_memory_search", query="secret")
            assert found["data"]["memories"] == []

    run(work)
    assert svc.memories.get(memory.id).content == "Alice's secret"


def test_the_admin_names_the_key_it_acts_on(gateway, keys, gateway_app):
    alice_id, _ = keys["alice"]

    async def work():
        async with http_session(gateway.url, ADMIN_TOKEN) as session:
            error, text = await call(session, "omniroute_memory_add", key="k", content="c")
            assert error and "apiKeyId is required" in text
            error, added = await call(
                session, "omniroute_memory_add", apiKeyId=alice_id, key="k", content="hello"
            )
            assert not error
            return added["data"]["memory"]["id"]

    memory_id = run(work)
    assert gateway_app.extensions["omniroute"].memories.get(memory_id).api_key_id == alice_id


@pytest.mark.parametrize(
    ("tool", "arguments", "field"),
    [
        ("omniroute_memory_clear", {"olderThan": "last tuesday"}, "olderThan"),
        ("omniroute_memory_add", {"key": "k", "content": "c", "type": "opinion"}, "type"),
        ("omniroute_memory_add", {"key": "", "content": "c"}, "key"),
        ("omniroute_memory_search", {"maxTokens": 0}, "maxTokens"),
        ("omniroute_memory_update", {"id": "x"}, "at least one field"),
    ],
)
def test_bad_arguments_are_tool_errors_naming_the_problem(gateway, keys, tool, arguments, field):
    async def work():
        async with http_session(gateway.url, keys["alice"][1]) as session:
            error, text = await call(session, tool, **arguments)
            assert error and field in text
            assert "pydantic" not in text and "validation error for" not in text, text
            assert not (await call(session, "omniroute_memory_search"))[0], "still serving"

    run(work)


@pytest.mark.parametrize("headers", [{}, {"Authorization": "Bearer sk-omr-wrong"}])
def test_http_needs_a_valid_bearer_token(gateway, headers):
    response = httpx.post(
        f"{gateway.url}/mcp",
        json={"jsonrpc": "2.0", "id": 1, "method": "tools/list"},
        headers={**headers, "Accept": "application/json, text/event-stream"},
    )
    assert response.status_code == 401


def stdio_parameters(tmp_path, secret: str, database_url: str | None) -> StdioServerParameters:
    env = environment(DATA_DIR=str(tmp_path), OMNIROUTE_API_KEY=secret, LOG_LEVEL="WARNING")
    if database_url:
        env["DATABASE_URL"] = database_url
    return StdioServerParameters(
        command=sys.executable, args=["-m", "omniroute.mcp"], env=env, cwd=str(ROOT)
    )


@pytest.mark.slow
def test_stdio_acts_as_the_key_in_its_environment(gateway_app, tmp_path, keys, database_url):
    alice_id, secret = keys["alice"]

    async def work():
        parameters = stdio_parameters(tmp_path, secret, database_url)
        async with stdio_client(parameters) as (read, write):
            async with ClientSession(read, write) as session:
                await session.initialize()
                assert {tool.name for tool in (await session.list_tools()).tools} == TOOLS
                _, added = await call(session, "omniroute_memory_add", key="k", content="via stdio")
                assert added["data"]["memory"]["content"] == "via stdio"
                error, _ = await call(session, "omniroute_memory_search", apiKeyId=keys["bob"][0])
                assert error

    run(work)
    found = gateway_app.extensions["omniroute"].memories.find(_filter(alice_id))
    assert [memory.content for memory in found] == ["via stdio"]


@pytest.mark.slow
def test_stdio_refuses_to_start_without_a_valid_key(tmp_path):
    result = subprocess.run(
        [sys.executable, "-m", "omniroute.mcp"],
        cwd=ROOT,
        env=environment(DATA_DIR=str(tmp_path), OMNIROUTE_API_KEY="sk-omr-nope"),
        capture_output=True,
        text=True,
        timeout=60,
        stdin=subprocess.DEVNULL,
    )
    assert result.returncode == 2
    assert "OMNIROUTE_API_KEY must be an active gateway key" in result.stderr


def _filter(owner):
    return MemoryFilter(api_key_id=owner)


def test_wrong_tokens_on_mcp_meet_the_same_brake_as_the_api(gateway, keys):
    # Regression: 200 wrong admin tokens on /mcp all got 401, never 429.
    initialize = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "initialize",
        "params": {
            "protocolVersion": "2025-06-18",
            "capabilities": {},
            "clientInfo": {"name": "guesser", "version": "1"},
        },
    }
    accept = "application/json, text/event-stream"
    with httpx.Client(base_url=gateway.url) as http:
        statuses = [
            http.post(
                "/mcp",
                json=initialize,
                headers={"Authorization": f"Bearer wrong-{n}", "Accept": accept},
            ).status_code
            for n in range(15)
        ]
        assert statuses[:11] == [401] * 11
        assert set(statuses[11:]) == {429}
        held = http.get("/api/keys", headers={"Authorization": "Bearer wrong"})
        assert held.status_code == 429 and held.headers["Retry-After"] == "1"
    time.sleep(1.1)  # one check a second: the right token still gets in

    async def work():
        async with http_session(gateway.url, keys["alice"][1]) as session:
            assert {tool.name for tool in (await session.list_tools()).tools} == TOOLS

    run(work)
