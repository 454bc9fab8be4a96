"""The Qdrant tier end to end in qdrant-client's local mode: dual-write, backfill, delete,
tenant filters, verify and repair, cleanup, and a dimension change."""

from __future__ import annotations

from datetime import timedelta

import numpy as np
import pytest
from sqlalchemy import select

from omniroute.core.clock import to_iso
from omniroute.core.db.tables import memories, qdrant_outbox
from omniroute.memory.life.bulk import clear
from omniroute.memory.model import MemoryFilter
from omniroute.memory.qdrant.connection import QdrantUnavailable
from omniroute.memory.qdrant.sync import SyncStopped
from omniroute.memory.search.reach import Reach
from tests.fake_upstream import EMBEDDING_DIMENSIONS
from tests.helpers import eventually
from tests.qdrant_helpers import ADMIN, enable, memory_app, points, put_points, synced

pytestmark = pytest.mark.both_stores

FACTS = {
    "pet:dog": "My golden retriever is called Max",
    "work:job": "I work as a nurse at the city hospital",
    "food:favourite": "My favourite food is spicy ramen",
}


@pytest.fixture
def app(tmp_path, database_url, static_path, upstream):
    provider = {
        "id": "fake",
        "baseUrl": upstream.base_url,
        "apiKey": "sk-up-4321",
        "models": ["m"],
        "embeddingModels": [{"id": "emb", "dimensions": EMBEDDING_DIMENSIONS}],
    }
    app = memory_app(
        tmp_path,
        database_url,
        static_path,
        QDRANT_PATH=str(tmp_path / "qdrant"),
        OMNIROUTE_PROVIDERS=[provider],
    )
    yield app
    app.extensions["omniroute"].close()


@pytest.fixture
def svc(app):
    return app.extensions["omniroute"]


def remember(svc, owner: str, facts: dict[str, str]) -> dict[str, str]:
    return {
        key: svc.memories.create(api_key_id=owner, key=key, content=content)[0].id
        for key, content in facts.items()
    }


def nearest(svc, query: str, owner: str = "alice", **more):
    return svc.retriever.rank(
        api_key_id=owner,
        query=query,
        settings=svc.memory_settings.get(),
        strategy=more.pop("strategy", "semantic"),
        **more,
    )


def test_enabling_backfills_what_was_there_and_retrieval_uses_qdrant(svc, client):
    alice = remember(svc, "alice", FACTS)
    bob = remember(svc, "bob", {"pet:cat": "Bob's cat is called Tom"})
    enable(client)
    assert svc.memory_settings.get().vector_store == "qdrant"
    synced(svc)
    assert points(svc, "alice") == set(alice.values())
    assert points(svc, "bob") == set(bob.values())
    ranking = nearest(svc, "golden retriever dog")
    assert ranking.vector_store == "qdrant" and ranking.fallback_reason is None
    assert ranking.items[0].memory.key == "pet:dog"
    assert {item.memory.api_key_id for item in ranking.items} == {"alice"}
    status = client.get("/api/memory/engine-status", headers=ADMIN).json["qdrant"]
    assert status["usedForRetrieval"] and status["ready"] and status["points"] == 4
    preview = client.post(
        "/api/memory/retrieve-preview",
        json={"query": "golden retriever dog", "apiKeyId": "alice", "strategy": "semantic"},
        headers=ADMIN,
    ).json
    assert preview["resolution"]["vectorStore"] == "qdrant"


def test_api_writes_updates_and_deletes_reach_qdrant_by_a_job(svc, client, api_key):
    enable(client)
    synced(svc)
    owner = api_key["id"]
    created = client.post(
        "/api/memory",
        json={"apiKeyId": owner, "key": "pet:dog", "content": FACTS["pet:dog"]},
        headers=ADMIN,
    )
    memory_id = created.json["memory"]["id"]
    synced(svc)
    assert points(svc, owner) == {memory_id}
    client.put(
        f"/api/memory/{memory_id}", json={"content": "My dog Max is a poodle"}, headers=ADMIN
    )
    synced(svc)
    found = nearest(svc, "poodle dog", owner=owner)
    assert found.items[0].memory.content == "My dog Max is a poodle"
    assert client.delete(f"/api/memory/{memory_id}", headers=ADMIN).status_code == 200
    synced(svc)
    assert points(svc, owner) == set()


def test_a_clear_of_a_key_removes_its_points_and_no_one_elses(svc, client):
    enable(client)
    remember(svc, "alice", FACTS)
    bob = remember(svc, "bob", {"pet:cat": "Bob's cat is called Tom"})
    synced(svc)
    clear(svc.memories, MemoryFilter(api_key_id="alice"))
    synced(svc)
    assert points(svc, "alice") == set()
    assert points(svc, "bob") == set(bob.values())


def test_writes_while_qdrant_is_off_are_backfilled_when_it_comes_on_again(svc, client):
    enable(client)
    first = remember(svc, "alice", {"pet:dog": FACTS["pet:dog"]})
    synced(svc)
    client.put("/api/settings/qdrant", json={"enabled": False}, headers=ADMIN)
    assert svc.memory_settings.get().vector_store == "auto"
    svc.memories.delete(first["pet:dog"])  # no outbox row: Qdrant is off
    later = remember(svc, "alice", {"work:job": FACTS["work:job"]})
    enable(client)
    synced(svc)
    assert points(svc, "alice") == set(later.values())  # the deleted one's point went too


AGED = "00000000-0000-4000-8000-000000000001"
EXPIRED = "00000000-0000-4000-8000-000000000002"


def test_expired_and_past_retention_points_are_filtered_inside_the_search(svc, client):
    enable(client)
    remember(svc, "alice", FACTS)
    synced(svc)
    now = svc.memories.clock()
    # Points whose memory aged past retention or expired since they were written, and that
    # match the query better than anything: Qdrant's own filter leaves them out.
    put_stale_points(svc, "alice")
    live = Reach(("alice",), created_after=to_iso(now - timedelta(days=30)))
    hits, _ = svc.qdrant.nearest(svc.memory_settings.get(), live, "golden retriever dog", 10)
    assert {memory_id for memory_id, _ in hits} == set(remember_ids(svc, "alice"))
    ranking = nearest(svc, "golden retriever dog")
    assert ranking.vector_store == "qdrant" and ranking.items[0].memory.key == "pet:dog"


def put_stale_points(svc, owner: str) -> None:
    """One point past retention, one past its expiry (no memory behind either)."""
    now = svc.memories.clock()
    put_points(
        svc,
        owner,
        {
            AGED: (to_iso(now - timedelta(days=400)), None),
            EXPIRED: (to_iso(now - timedelta(hours=2)), to_iso(now - timedelta(hours=1))),
        },
    )


def remember_ids(svc, owner: str) -> list[str]:
    return [memory.id for memory in svc.memories.find(MemoryFilter(api_key_id=owner))]


def test_a_session_scoped_search_stays_in_its_session(svc, client):
    enable(client)
    svc.memories.create(api_key_id="alice", key="a", content=FACTS["pet:dog"], session_id="s1")
    svc.memories.create(
        api_key_id="alice", key="b", content="My other golden retriever is Rex", session_id="s2"
    )
    synced(svc)
    ranking = nearest(svc, "golden retriever", session_id="s1")
    assert ranking.vector_store == "qdrant"
    assert [item.memory.key for item in ranking.items] == ["a"]


def test_a_small_tenant_beside_a_large_one_gets_its_own_top_k(svc, client):
    """The reference searched a global top-k and filtered by key afterwards."""
    enable(client)
    remember(svc, "big", {f"pet:{n}": f"My golden retriever number {n}" for n in range(150)})
    small = remember(svc, "small", {"pet:dog": FACTS["pet:dog"]})
    synced(svc)
    hits, _ = svc.qdrant.nearest(
        svc.memory_settings.get(), Reach(("small",)), "golden retriever", 20
    )
    assert [memory_id for memory_id, _ in hits] == [small["pet:dog"]]


def test_a_failed_write_leaves_the_memory_marked_and_the_next_run_repairs_it(
    svc, client, monkeypatch
):
    enable(client)
    synced(svc)
    index = svc.qdrant.sync.index

    def refuse(*args, **kwargs):
        raise QdrantUnavailable("Qdrant at test did not answer in time")

    monkeypatch.setattr(index, "upsert", refuse)
    monkeypatch.setattr(svc.jobs, "enqueue", lambda *a, **k: None)  # this test runs the job
    memory_id = remember(svc, "alice", {"pet:dog": FACTS["pet:dog"]})["pet:dog"]
    with pytest.raises(SyncStopped, match="did not answer in time"):
        svc.qdrant.sync.run()
    with svc.db.read() as conn:
        row = conn.execute(select(qdrant_outbox)).mappings().one()
    assert row["memory_id"] == memory_id and row["attempts"] == 1
    assert "did not answer" in row["last_error"]
    assert svc.qdrant.sync.outbox.stats() == {
        "pending": 1,
        "failing": 1,
        "lastError": "Qdrant at test did not answer in time",
    }
    monkeypatch.undo()
    svc.qdrant.sync.run()
    assert points(svc, "alice") == {memory_id}
    assert svc.qdrant.sync.outbox.stats()["pending"] == 0


def test_a_change_made_while_its_row_is_served_is_not_lost(svc, client, monkeypatch):
    enable(client)
    synced(svc)
    memory_id = remember(svc, "alice", {"pet:dog": FACTS["pet:dog"]})["pet:dog"]
    synced(svc)
    sync = svc.qdrant.sync
    original = sync.index.upsert

    def edit_meanwhile(*args, **kwargs):
        original(*args, **kwargs)
        if not edited:
            edited.append(True)
            svc.memories.update(memory_id, content="My dog Max is a poodle")

    edited: list[bool] = []
    monkeypatch.setattr(svc.jobs, "enqueue", lambda *a, **k: None)
    svc.memories.update(memory_id, content="My dog Max is a beagle")
    monkeypatch.setattr(sync.index, "upsert", edit_meanwhile)
    sync.run(max_batches=1)
    assert sync.outbox.stats()["pending"] == 1  # the poodle edit still waits
    monkeypatch.undo()
    sync.run()
    assert nearest(svc, "poodle").items[0].memory.content == "My dog Max is a poodle"


def test_verify_counts_per_key_and_repairs_drift(svc, client):
    enable(client)
    alice = remember(svc, "alice", FACTS)
    synced(svc)
    sync = svc.qdrant.sync
    target = sync.target()
    lost = alice["pet:dog"]
    sync.index.delete(target.config, target.collection, [lost])
    orphan = "00000000-0000-4000-8000-0000000000aa"
    put_points(svc, "carol", {orphan: (svc.memories.now(), None)})
    report = client.post("/api/settings/qdrant/verify", json={"repair": False}, headers=ADMIN).json
    by_key = {row["apiKeyId"]: row for row in report["tenants"]}
    assert by_key["alice"] == {
        "apiKeyId": "alice",
        "memories": 3,
        "points": 2,
        "missing": 1,
        "extra": 0,
    }
    assert by_key["carol"] == {
        "apiKeyId": "carol",
        "memories": 0,
        "points": 1,
        "missing": 0,
        "extra": 1,
    }
    assert report["repaired"] is False and points(svc, "carol") == {orphan}
    report = client.post("/api/settings/qdrant/verify", json={}, headers=ADMIN).json
    assert report["repaired"] is True
    synced(svc)
    assert points(svc, "alice") == set(alice.values())
    assert points(svc, "carol") == set()


def test_cleanup_deletes_points_past_expiry_or_retention_and_orphans(svc, client):
    enable(client)
    alice = remember(svc, "alice", FACTS)
    synced(svc)
    put_stale_points(svc, "alice")
    orphan = "00000000-0000-4000-8000-0000000000b3"
    put_points(svc, "dave", {orphan: (svc.memories.now(), None)})
    result = client.post("/api/settings/qdrant/cleanup", headers=ADMIN).json
    assert result == {"ok": True, "deletedCount": 3, "retentionDays": 30}
    assert points(svc) == set(alice.values())


def test_a_new_embedding_model_moves_to_a_new_collection(svc, client, upstream):
    enable(client)
    remember(svc, "alice", FACTS)
    synced(svc)
    first = svc.qdrant.sync.target()
    assert first.embedder.dim == 256
    shown = enable(client, embeddingModel="fake/emb")
    assert shown["embeddingModel"] == "fake/emb"
    synced(svc)
    second = svc.qdrant.sync.target()
    assert second.collection != first.collection and second.embedder.dim == EMBEDDING_DIMENSIONS
    assert svc.qdrant.sync.progress.reused == 0  # another model's vectors: embedded anew
    assert len(points(svc, "alice")) == 3
    assert svc.qdrant.sync.index.count(first.config, first.collection) == 3  # left as it was
    assert any(r["path"] == "/v1/embeddings" for r in upstream.requests)
    models = client.get("/api/settings/qdrant/embedding-models", headers=ADMIN).json["models"]
    assert (
        models[0]["value"] == "" and {"value": "fake/emb", "label": "fake/emb (8 dims)"} in models
    )


def test_vector_size_asks_a_provider_model_for_shorter_vectors(svc, client, upstream):
    shown = enable(client, embeddingModel="fake/emb", vectorSize=4)
    assert shown["vectorSize"] == 4
    remember(svc, "alice", FACTS)
    synced(svc)
    target = svc.qdrant.sync.target()
    assert target.embedder.dim == 4 and "__remote-fake-emb-4__" in target.collection
    asked = [r["body"] for r in upstream.requests if r["path"] == "/v1/embeddings"]
    assert asked and all(body["dimensions"] == 4 for body in asked)
    assert len(points(svc, "alice")) == 3
    found = nearest(svc, "golden retriever")
    assert found.vector_store == "qdrant", found.fallback_reason


def test_vector_size_a_local_model_cannot_make_is_refused_naming_it(svc, client):
    answer = client.put(
        "/api/settings/qdrant", json={"enabled": True, "vectorSize": 128}, headers=ADMIN
    )
    assert answer.status_code == 409
    assert answer.json["error"]["details"][0]["field"] == "enabled"
    assert "vectorSize 128: static model" in answer.json["error"]["message"]
    assert "cannot be asked for 128" in answer.json["error"]["message"]
    assert svc.qdrant.sync.settings.get().enabled is False


def test_the_search_route_is_scoped_to_one_key(svc, client):
    enable(client)
    remember(svc, "alice", FACTS)
    remember(svc, "bob", {"pet:dog": "Bob's golden retriever is called Rex"})
    synced(svc)
    found = client.post(
        "/api/settings/qdrant/search",
        json={"query": "golden retriever", "apiKeyId": "bob", "topK": 5},
        headers=ADMIN,
    ).json
    assert found["ok"] is True
    assert [hit["content"] for hit in found["results"]] == ["Bob's golden retriever is called Rex"]


def test_the_cli_backfills_in_the_foreground(app, svc, client):
    enable(client)
    alice = remember(svc, "alice", FACTS)
    synced(svc)
    target = svc.qdrant.sync.target()
    svc.qdrant.sync.index.delete(target.config, target.collection, list(alice.values()))
    result = app.test_cli_runner().invoke(args=["memory", "reindex", "--qdrant"])
    assert result.exit_code == 0, result.output
    assert "3 points written" in result.output and "0 left" in result.output
    assert points(svc, "alice") == set(alice.values())


def test_the_cli_says_why_when_qdrant_is_off(app):
    result = app.test_cli_runner().invoke(args=["memory", "reindex", "--qdrant"])
    assert result.exit_code == 1 and "Qdrant is not enabled" in result.output


def test_a_backfill_takes_the_local_indexs_vectors_instead_of_embedding_again(svc, client):
    alice = remember(svc, "alice", FACTS)
    assert eventually(lambda: svc.backfill.pending() == 0, timeout=30)
    embedded = svc.embeddings.resolve(svc.memory_settings.get()).embedder.stats()["misses"]
    enable(client)
    synced(svc)
    assert svc.qdrant.sync.progress.reused == 3
    # The probe's query is the one new text: no memory was embedded a second time.
    assert svc.embeddings.resolve(svc.memory_settings.get()).embedder.stats()["misses"] == (
        embedded + 1
    )
    with svc.db.read() as conn:
        seq = conn.execute(select(memories.c.seq).where(memories.c.id == alice["pet:dog"])).scalar()
        (held,) = svc.vectors.stored(conn, [seq]).values()
    fresh = svc.qdrant.sync.target().embedder.inner.embed([FACTS["pet:dog"]])[0]
    assert np.allclose(held, fresh, atol=1e-6)
    assert nearest(svc, "golden retriever dog").items[0].memory.key == "pet:dog"


def test_an_empty_qdrant_answer_falls_back_to_the_local_index(svc, client):
    """As the specification has it: no hit from Qdrant is asked of the local index too (a
    point still on its way, or lost)."""
    enable(client)
    ids = remember(svc, "alice", FACTS)
    synced(svc)
    target = svc.qdrant.sync.target()
    svc.qdrant.sync.index.delete(target.config, target.collection, list(ids.values()))
    ranking = nearest(svc, "golden retriever dog")
    assert "found no point" in ranking.fallback_reason
    assert ranking.vector_store != "qdrant" and ranking.items[0].memory.key == "pet:dog"


def test_a_users_search_in_qdrant_sees_their_points_and_the_keys_never_anothers(svc, client):
    enable(client)
    svc.memories.create(api_key_id="alice", key="a", content="The office poodle is Bella")
    svc.memories.create(api_key_id="alice", user_id="u1", key="b", content="My poodle is Rex")
    svc.memories.create(api_key_id="alice", user_id="u2", key="c", content="My poodle is Fifi")
    synced(svc)
    ranking = nearest(svc, "poodle dog", user_id="u1")
    assert ranking.vector_store == "qdrant"
    assert {item.memory.key for item in ranking.items} == {"a", "b"}
    assert {item.memory.key for item in nearest(svc, "poodle dog").items} == {"a"}
