"""A remote primary really serves chats: the generic backend pointed at a loopback memory
service answers the gateway's retrieval and takes its extracted facts; with it down, the
local store answers and the response says so."""

from __future__ import annotations

import pytest

from omniroute.memory.model import MemoryFilter
from omniroute.proxy.injection import HEADER
from tests.helpers import ADMIN_TOKEN, eventually

pytestmark = pytest.mark.both_stores
ADMIN = {"Authorization": f"Bearer {ADMIN_TOKEN}"}


@pytest.fixture
def alice(gateway_app, sdk, memory_service, monkeypatch):
    """Memory on, the service as primary and the local store as fallback, and alice's key."""
    monkeypatch.setattr("omniroute.jobs.queue.LOCAL_RETRY_INTERVALS", (0.01, 0.01, 0.01))
    svc = gateway_app.extensions["omniroute"]
    svc.memory_settings.update(
        {
            "enabled": True,
            "backendConfigs": {"brain": {"baseUrl": memory_service.url}},
            "primaryBackend": "brain",
            "fallbackBackends": ["sqlite"],
        }
    )
    key, secret = svc.keys.create("alice")
    return svc, key.id, sdk(secret)


def ask(client, text: str):
    return client.chat.completions.with_raw_response.create(
        model="fake/m", messages=[{"role": "user", "content": text}]
    )


def test_the_primary_backends_memories_are_injected(alice, memory_service, upstream):
    svc, key_id, client = alice
    memory_service.add(apiKeyId=key_id, key="preference:lang", content="I prefer TypeScript")
    raw = ask(client, "TypeScript or Go for this?")
    assert raw.headers["x-omniroute-memories"] == "1"
    assert raw.headers["x-omniroute-memory-backend"] == "brain"
    assert "x-omniroute-memory-fallback" not in raw.headers
    first = upstream.last_body["messages"][0]
    assert first["content"].startswith(HEADER) and '"I prefer TypeScript"' in first["content"]
    search = next(r for r in memory_service.requests if r["path"] == "/memories/search")
    assert search["query"]["apiKeyId"] == key_id


def test_extracted_facts_are_stored_in_the_primary_not_locally(alice, memory_service):
    svc, key_id, client = alice
    ask(client, "I prefer TypeScript.")
    stored = eventually(lambda: [m for m in memory_service.memories.values()])
    assert [(m["apiKeyId"], m["key"]) for m in stored] == [(key_id, "preference:typescript")]
    assert stored[0]["metadata"]["source"] == "user_message"
    assert svc.memories.find(MemoryFilter(api_key_id=key_id)) == []
    assert eventually(lambda: svc.outbox.pending() == 0)


def test_with_the_primary_down_the_local_store_answers_and_says_so(alice, memory_service, upstream):
    svc, key_id, client = alice
    svc.memories.create(api_key_id=key_id, key="preference:lang", content="I prefer TypeScript")
    memory_service.answers[("GET", "/health")] = (503, "down for maintenance")
    svc.backends.check()  # the health job finds it down (it may have been ready since start)
    raw = ask(client, "TypeScript or Go for this?")
    assert raw.headers["x-omniroute-memory-backend"] == "local"
    assert raw.headers["x-omniroute-memory-fallback"] == "brain"
    assert '"I prefer TypeScript"' in upstream.last_body["messages"][0]["content"]


def test_facts_wait_in_the_outbox_while_the_primary_is_down(alice, memory_service):
    svc, key_id, client = alice
    memory_service.answers[("GET", "/health")] = (503, "down")
    ask(client, "I prefer TypeScript.")
    svc.jobs.wait(10)
    # The user's fact waits for the sweep (the reply, "Noted.", had none to send).
    assert svc.outbox.pending() == 1, "kept, not lost, and not stored elsewhere"
    assert svc.memories.find(MemoryFilter(api_key_id=key_id)) == []
    del memory_service.answers[("GET", "/health")]
    for entry_id in svc.outbox.stale(older_than=-1):
        svc.outbox.process(entry_id)
    assert [m["key"] for m in memory_service.memories.values()] == ["preference:typescript"]


def test_another_keys_memories_from_a_backend_are_never_injected(alice, memory_service, upstream):
    svc, key_id, client = alice
    leaked = memory_service.add(apiKeyId="bob", key="k", content="Bob prefers TypeScript")
    memory_service.answers[("GET", "/memories/search")] = (200, [leaked])
    raw = ask(client, "TypeScript?")
    assert raw.headers["x-omniroute-memories"] == "0"
    assert all("Bob" not in str(m["content"]) for m in upstream.last_body["messages"])


def test_the_health_job_checks_every_backend_and_initialises_one_that_answers_again(
    alice, memory_service, gateway_app
):
    svc, _, _ = alice
    client = gateway_app.test_client()

    def run_health() -> dict:
        answer = client.post("/api/jobs/backend-health/run", headers=ADMIN)
        assert answer.status_code == 200 and answer.json["status"] == "ok", answer.json
        return answer.json["result"]

    memory_service.answers[("GET", "/health")] = (503, "down for maintenance")
    assert svc.backends.current().initialize_all()["brain"] is not None
    down = run_health()
    assert down["down"] == 1 and down["backends"]["brain"]["ok"] is False
    assert down["backends"]["local"]["ok"] is True
    del memory_service.answers[("GET", "/health")]
    checks = sum(1 for r in memory_service.requests if r["path"] == "/health")
    up = run_health()
    assert up["down"] == 0 and {i: s["ok"] for i, s in up["backends"].items()} == {
        "local": True,
        "brain": True,
    }
    # The check, then the initialisation the answering backend got again.
    assert sum(1 for r in memory_service.requests if r["path"] == "/health") == checks + 2
