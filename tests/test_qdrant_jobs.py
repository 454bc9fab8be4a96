"""The dual-write as the Procfile runs it: RQ jobs in a real, long-lived worker process; chats,
whose extracted facts reach Qdrant and which never fail for Qdrant's sake; and MCP tools."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from omniroute.memory.model import MemoryFilter
from tests.fake_qdrant import FakeQdrant
from tests.gateway_server import RunningGateway
from tests.helpers import ADMIN_TOKEN, REDIS_TEST_URL, environment, eventually, run_async, stop
from tests.mcp_client import call, http_session
from tests.qdrant_helpers import ADMIN, chat, enable, memory_app, points, synced

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture
def qdrant():
    server = FakeQdrant().start()
    yield server
    server.stop()


def chat_app(tmp_path, static_path, upstream, **more):
    provider = {"id": "fake", "baseUrl": upstream.base_url, "models": ["m"]}
    return memory_app(tmp_path, None, static_path, OMNIROUTE_PROVIDERS=[provider], **more)


def upserted(qdrant: FakeQdrant) -> set[str]:
    return {
        str(point["id"])
        for request in qdrant.requests
        if request["method"] == "PUT" and request["path"].split("?")[0].endswith("/points")
        for point in request["body"]["points"]
    }


def test_with_redis_a_real_worker_writes_and_deletes_the_points(
    tmp_path, static_path, qdrant, redis_db
):
    app = memory_app(tmp_path, None, static_path, REDIS_URL=REDIS_TEST_URL, QDRANT_URL=qdrant.url)
    svc = app.extensions["omniroute"]
    client = app.test_client()
    log = (tmp_path / "worker.log").open("w")
    worker = subprocess.Popen(
        [sys.executable, "-m", "flask", "--app", "app", "worker"],
        cwd=ROOT,
        env=environment(
            DATA_DIR=str(tmp_path),
            REDIS_URL=REDIS_TEST_URL,
            QDRANT_URL=qdrant.url,
            MEMORY_STATIC_MODEL=str(static_path),
            OMNIROUTE_ADMIN_TOKEN=ADMIN_TOKEN,
        ),
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    try:
        key = client.post("/api/keys", json={"name": "k"}, headers=ADMIN).json
        enable(client)
        created = client.post(
            "/api/memory",
            json={"apiKeyId": key["id"], "key": "pet:dog", "content": "My golden retriever Max"},
            headers=ADMIN,
        ).json["memory"]
        assert eventually(lambda: created["id"] in upserted(qdrant), timeout=60), (
            tmp_path / "worker.log"
        ).read_text()
        assert eventually(lambda: svc.qdrant.sync.outbox.stats()["pending"] == 0, timeout=30)
        client.delete(f"/api/memory/{created['id']}", headers=ADMIN)
        assert eventually(
            lambda: any(
                r["path"].startswith("/collections/")
                and r["path"].split("?")[0].endswith("/points/delete")
                and r["body"] == {"points": [created["id"]]}
                for r in qdrant.requests
            ),
            timeout=60,
        ), (tmp_path / "worker.log").read_text()
        assert "Qdrant 1 points written" in (tmp_path / "worker.log").read_text()
    finally:
        stop(worker)
        log.close()
        svc.close()


def test_a_chats_extracted_facts_reach_qdrant(tmp_path, static_path, upstream):
    app = chat_app(tmp_path, static_path, upstream, QDRANT_PATH=str(tmp_path / "q"))
    svc = app.extensions["omniroute"]
    try:
        client = app.test_client()
        enable(client)
        key, secret = svc.keys.create("chat")
        chat(client, secret, "I prefer TypeScript.")
        assert eventually(lambda: points(svc, key.id), timeout=30)
        synced(svc)
        (memory,) = svc.memories.find(MemoryFilter(api_key_id=key.id))
        assert points(svc, key.id) == {memory.id}
    finally:
        svc.close()


def test_a_chat_with_qdrant_down_is_answered_with_memories_from_the_local_index(
    tmp_path, static_path, upstream, qdrant
):
    app = chat_app(tmp_path, static_path, upstream, QDRANT_URL=qdrant.url)
    svc = app.extensions["omniroute"]
    try:
        client = app.test_client()
        enable(client)
        key, secret = svc.keys.create("chat")
        svc.memories.create(api_key_id=key.id, key="pet:dog", content="My golden retriever is Max")
        synced(svc)
        assert eventually(lambda: svc.backfill.pending() == 0, timeout=30)
        qdrant.mode = "down"
        chat(client, secret, "golden retriever?")
        system = upstream.last_body["messages"][0]
        assert system["role"] == "system" and "My golden retriever is Max" in system["content"]
    finally:
        svc.close()


def test_memories_an_agent_adds_and_deletes_over_mcp_reach_and_leave_qdrant(tmp_path, static_path):
    app = memory_app(tmp_path, None, static_path, QDRANT_PATH=str(tmp_path / "q"))
    svc = app.extensions["omniroute"]
    server = RunningGateway(app).start()
    try:
        enable(app.test_client())
        key, secret = svc.keys.create("agent")

        async def add():
            async with http_session(server.url, secret) as session:
                _, added = await call(
                    session, "omniroute_memory_add", key="pet:dog", content="My dog is Max"
                )
                return added["data"]["memory"]["id"]

        memory_id = run_async(add)
        synced(svc)
        assert points(svc, key.id) == {memory_id}

        async def delete():
            async with http_session(server.url, secret) as session:
                error, _ = await call(session, "omniroute_memory_delete", id=memory_id)
                assert not error

        run_async(delete)
        synced(svc)
        assert points(svc, key.id) == set()
    finally:
        server.stop()
        svc.close()
