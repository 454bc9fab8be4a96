"""The Qdrant tier over HTTP, against a loopback server that answers like Qdrant: health,
errors, timeouts, the api-key header, quantisation on the wire, and the fallback chain."""

from __future__ import annotations

import time

import pytest

from omniroute.memory.qdrant.config import QdrantConfig
from omniroute.memory.qdrant.connection import QdrantConnection
from tests.fake_qdrant import FakeQdrant
from tests.qdrant_helpers import ADMIN, enable, memory_app, synced


@pytest.fixture
def qdrant():
    server = FakeQdrant().start()
    yield server
    server.stop()


@pytest.fixture
def app(tmp_path, static_path, qdrant):
    app = memory_app(
        tmp_path,
        None,
        static_path,
        QDRANT_URL=qdrant.url,
        QDRANT_TIMEOUT_MS=300,
        QDRANT_RETRY_SECONDS=30,
    )
    yield app
    app.extensions["omniroute"].close()


@pytest.fixture
def svc(app):
    return app.extensions["omniroute"]


def config(url: str, **more) -> QdrantConfig:
    values = dict(
        enabled=True,
        url=url,
        path=None,
        api_key=None,
        collection="omniroute_memory",
        embedding_model=None,
        quantization="none",
        host=url,
        port=6333,
    )
    return QdrantConfig(**{**values, **more})


def test_health_is_the_servers_readyz_with_the_api_key_header(qdrant):
    qdrant.api_key = "qk-secret-1234"
    connection = QdrantConnection(allow_local=True, search_timeout=0.3)
    health = connection.health(config(qdrant.url, api_key="qk-secret-1234"))
    assert health.ok and health.error is None
    assert qdrant.requests[-1]["path"] == "/readyz"
    assert qdrant.requests[-1]["headers"]["api-key"] == "qk-secret-1234"
    refused = QdrantConnection(allow_local=True, search_timeout=0.3).health(
        config(qdrant.url, api_key="wrong-key-9999")
    )
    assert not refused.ok and "refused the API key (401)" in refused.error
    assert "wrong-key" not in refused.error
    connection.close()


def test_an_error_status_and_a_silent_server_are_reported_not_raised(qdrant):
    connection = QdrantConnection(allow_local=True, search_timeout=0.3)
    qdrant.mode = "down"
    down = connection.health(config(qdrant.url))
    assert not down.ok and "answered 503" in down.error
    # The server would answer after 8 s; the search gives up at 0.3 s. The bound below only
    # says it did not wait for the answer, with room for a loaded machine.
    qdrant.mode, qdrant.slow_seconds = "slow", 8.0
    started = time.monotonic()
    # Health uses the write client (10 s): a search times out at QDRANT_TIMEOUT_MS.
    from omniroute.memory.qdrant.connection import QdrantUnavailable
    from omniroute.memory.qdrant.index import QdrantIndex, tenant_filter

    index = QdrantIndex(connection)
    with pytest.raises(QdrantUnavailable, match="did not answer in time"):
        index.search(config(qdrant.url), "c", [0.1, 0.2], 5, tenant_filter("k"))
    assert time.monotonic() - started < 6
    connection.close()


def test_nothing_listening_is_unreachable():
    connection = QdrantConnection(allow_local=True, search_timeout=0.3)
    health = connection.health(config("http://127.0.0.1:9"))
    assert not health.ok and "could not reach Qdrant at http://127.0.0.1:9" in health.error


def test_metadata_addresses_are_refused_before_any_request():
    connection = QdrantConnection(allow_local=True, search_timeout=0.3)
    health = connection.health(config("http://169.254.169.254:6333"))
    assert not health.ok and "cloud metadata" in health.error


@pytest.mark.parametrize(
    ("mode", "expected", "search"),
    [
        ("none", None, None),
        (
            "int8",
            {"scalar": {"type": "int8", "quantile": 0.99, "always_ram": True}},
            {"rescore": True},
        ),
        ("binary", {"binary": {"always_ram": True}}, {"rescore": True, "oversampling": 2.0}),
    ],
)
def test_quantisation_is_asked_for_at_creation_and_rescored_in_search(
    svc, client, qdrant, mode, expected, search
):
    enable(client, quantization=mode)
    svc.memories.create(api_key_id="alice", key="pet:dog", content="My golden retriever Max")
    synced(svc)
    (created,) = [r for r in qdrant.requests if r["method"] == "PUT" and r["path"].count("/") == 2]
    assert created["body"]["vectors"] == {"size": 256, "distance": "Cosine"}
    assert created["body"].get("quantization_config") == expected
    indexed = [
        r["body"]["field_name"]
        for r in qdrant.requests
        if r["path"].split("?")[0].endswith("/index")
    ]
    assert set(indexed) >= {"apiKeyId", "sessionId", "createdAtUnix", "expiresAtUnix"}
    ranking = svc.retriever.rank(
        api_key_id="alice",
        query="golden retriever",
        settings=svc.memory_settings.get(),
        strategy="semantic",
    )
    assert ranking.vector_store == "qdrant", ranking.fallback_reason
    (query,) = [r for r in qdrant.requests if r["path"].endswith("/points/query")][-1:]
    assert (query["body"].get("params") or {}).get("quantization") == search
    must = query["body"]["filter"]["must"]
    assert must[0] == {"key": "apiKeyId", "match": {"value": "alice"}}


def test_ef_construct_is_asked_for_at_creation_and_a_collection_is_changed_to_a_new_one(
    svc, client, qdrant
):
    enable(client, hnswEfConstruct=200)
    svc.memories.create(api_key_id="alice", key="pet:dog", content="My golden retriever Max")
    synced(svc)
    (created,) = [r for r in qdrant.requests if r["method"] == "PUT" and r["path"].count("/") == 2]
    assert created["body"]["hnsw_config"] == {"ef_construct": 200}
    client.put("/api/settings/qdrant", json={"hnswEfConstruct": 64}, headers=ADMIN)
    svc.memories.create(api_key_id="alice", key="pet:cat", content="My cat Tom")
    synced(svc)
    changed = [r["body"] for r in qdrant.requests if r["method"] == "PATCH"]
    assert changed == [{"hnsw_config": {"ef_construct": 64}}], "the same collection, changed"
    (collection,) = qdrant.collections.values()
    assert len(collection["points"]) == 2


def test_enabling_needs_a_healthy_qdrant(client, qdrant, svc):
    qdrant.mode = "down"
    response = client.put("/api/settings/qdrant", json={"enabled": True}, headers=ADMIN)
    assert response.status_code == 409
    assert response.json["error"]["details"][0]["field"] == "enabled"
    assert "answered 503" in response.json["error"]["details"][0]["message"]
    assert svc.qdrant.sync.settings.get().enabled is False


def test_qdrant_down_falls_back_to_the_local_index_then_skips_it_for_a_while(svc, client, qdrant):
    enable(client)
    svc.memories.create(api_key_id="alice", key="pet:dog", content="My golden retriever Max")
    synced(svc)
    eventually_local = svc.backfill.run()
    assert eventually_local.errors == 0
    qdrant.mode, qdrant.slow_seconds = "slow", 1.0

    def rank():
        return svc.retriever.rank(
            api_key_id="alice",
            query="golden retriever",
            settings=svc.memory_settings.get(),
            strategy="hybrid",
        )

    started = time.monotonic()
    first = rank()
    assert time.monotonic() - started < 0.9  # one timeout of 300 ms, not the server's 1 s
    assert first.vector_store == "sqlite-vec"
    assert (
        first.fallback_reason.startswith("qdrant: Qdrant at ")
        and "in time" in first.fallback_reason
    )
    assert first.items[0].memory.key == "pet:dog"
    asked = len(qdrant.requests)
    second = rank()
    assert len(qdrant.requests) == asked  # skipped: the circuit is open
    assert "trying again in" in second.fallback_reason
    assert second.items[0].memory.key == "pet:dog"
    status = client.get("/api/memory/engine-status", headers=ADMIN).json["qdrant"]
    assert status["usedForRetrieval"] is False and "trying again in" in status["reason"]


def test_a_dual_write_against_a_server_sends_the_tenant_payload(svc, client, qdrant):
    enable(client)
    memory, _ = svc.memories.create(
        api_key_id="alice", key="pet:dog", content="My golden retriever Max", session_id="s1"
    )
    synced(svc)
    (upsert,) = [
        r
        for r in qdrant.requests
        if r["method"] == "PUT" and r["path"].endswith("/points?wait=true")
    ]
    (point,) = upsert["body"]["points"]
    assert point["id"] == memory.id
    assert point["payload"]["apiKeyId"] == "alice" and point["payload"]["sessionId"] == "s1"
    assert point["payload"]["key"] == "pet:dog" and point["payload"]["expiresAtUnix"] is None
    assert "content" not in point["payload"]  # the text stays in the SQL store
    svc.memories.delete(memory.id)
    synced(svc)
    deletes = [r for r in qdrant.requests if r["path"].endswith("/points/delete?wait=true")]
    assert deletes[-1]["body"] == {"points": [memory.id]}


def test_on_postgresql_without_pgvector_qdrant_holds_the_vectors_and_keywords_back_it_up(
    tmp_path, static_path, system_postgres, qdrant
):
    """The dyno case: no pgvector, so meaning comes from Qdrant; without it, keywords."""
    app = memory_app(tmp_path, system_postgres.url, static_path, QDRANT_URL=qdrant.url)
    svc = app.extensions["omniroute"]
    try:
        enable(app.test_client())
        svc.memories.create(api_key_id="alice", key="pet:dog", content="My golden retriever Max")
        synced(svc)

        def rank(query):
            return svc.retriever.rank(
                api_key_id="alice", query=query, settings=svc.memory_settings.get(),
                strategy="semantic",
            )  # fmt: skip

        served = rank("golden retriever")
        assert served.vector_store == "qdrant" and served.strategy_used == "semantic"
        assert served.items[0].memory.key == "pet:dog"
        qdrant.mode = "down"
        fallen = rank("golden retriever")
        assert fallen.strategy_used == "keyword" and fallen.items[0].memory.key == "pet:dog"
        qdrant_reason, local_reason = fallen.fallback_reason.split("; ", 1)
        assert qdrant_reason.startswith("qdrant: Qdrant at ") and "answered 503" in qdrant_reason
        assert local_reason.startswith("pgvector is not available")
    finally:
        svc.close()
