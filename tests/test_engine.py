"""The retrieval engine with real vectors (the distilled static model) in sqlite-vec."""

import threading

import pytest
import sqlite_vec

from omniroute.factory import create_app
from omniroute.memory.model import MemoryFilter
from omniroute.memory.search.fusion import RetrievalOptions
from omniroute.memory.search.graph import TenantGraph
from omniroute.memory.search.retrieval import Retriever
from omniroute.memory.search.vectors import SqliteVecIndex
from tests.helpers import app_settings, eventually

pytestmark = pytest.mark.both_stores

FACTS = {
    "job": "I work as a nurse at the city hospital",
    "dog": "My golden retriever is called Max",
    "lang": "I prefer TypeScript over Python",
    "city": "We moved to Lisbon in spring",
}


@pytest.fixture
def svc(engine_app):
    return engine_app.extensions["omniroute"]


def settle(svc) -> None:
    """Wait until the backfill has embedded every pending memory."""
    # As long as a loaded CI machine may need for the first embedding (the model loads then).
    done = eventually(
        lambda: svc.backfill.pending() == 0 and not svc.backfill.progress.running, timeout=30
    )
    assert done, svc.backfill.progress
    svc.jobs.wait(10)


@pytest.fixture
def alice(svc):
    for key, content in FACTS.items():
        svc.memories.create(api_key_id="alice", key=key, content=content)
    settle(svc)
    return "alice"


def rank(svc, query: str, owner: str = "alice", strategy: str = "semantic", **options):
    """Rank as the app's retriever does; `options` (fusion, top_k) make one of their own."""
    retriever = svc.retriever
    if options:
        retriever = Retriever(
            svc.memories, svc.vectors, svc.embeddings, options=RetrievalOptions(**options)
        )
    try:
        return retriever.rank(
            api_key_id=owner, query=query, settings=svc.memory_settings.get(), strategy=strategy
        )
    finally:
        if retriever is not svc.retriever:
            retriever.close()


def vector_count(svc) -> int:
    with svc.db.read() as conn:
        return svc.vectors.count(conn)


def test_written_memories_get_vectors_by_themselves(svc, alice):
    assert vector_count(svc) == len(FACTS)
    with svc.db.read() as conn:
        assert svc.vectors.meta(conn).signature == "static:static-minilm-256:256"


def test_semantic_search_finds_by_meaning_without_shared_words(svc, alice):
    ranking = rank(svc, "Which city do we live in?")
    assert ranking.strategy_used == "semantic" and ranking.fallback_reason is None
    assert ranking.items[0].memory.key == "city"
    assert ranking.items[0].tier == "vector" and ranking.items[0].vec_score > 0.4
    assert rank(svc, "Which programming language do I like?").items[0].memory.key == "lang"


def test_nothing_relevant_finds_nothing(svc, alice):
    assert rank(svc, "quantum chromodynamics lattice simulation").items == []
    assert rank(svc, "quantum chromodynamics lattice simulation", strategy="hybrid").items == []


def test_hybrid_fuses_keyword_and_vector_scores(svc, alice):
    ranking = rank(svc, "Lisbon: which city do we live in?", strategy="hybrid")
    top = ranking.items[0]
    assert top.memory.key == "city" and top.tier == "hybrid"
    assert top.fts_score is not None and top.vec_score is not None
    rrf = rank(svc, "Lisbon: which city do we live in?", strategy="hybrid", fusion="rrf")
    assert rrf.items[0].memory.key == "city"


def test_a_small_tenant_gets_its_own_neighbours_beside_a_large_one(svc):
    with svc.db.write() as conn:
        for number in range(400):
            svc.memories.create(
                api_key_id="big",
                key=f"city{number}",
                content=f"We moved to Lisbon in spring, note {number}",
                connection=conn,
            )
    svc.memories.create(api_key_id="small", key="city", content="We moved to Porto in spring")
    svc.memories.notify_write()
    settle(svc)
    ranking = rank(svc, "Which city do we live in?", owner="small", top_k=5)
    assert [item.memory.key for item in ranking.items] == ["city"]
    assert all(item.memory.api_key_id == "big" for item in rank(svc, "city", owner="big").items)


def test_expired_memories_are_left_out_of_vector_results(svc, alice):
    svc.memories.update(
        svc.memories.find(_filter("alice"))[0].id, expires_at="2000-01-01T00:00:00.000Z"
    )
    expired = svc.memories.find(_filter("alice"), limit=10)
    keys = {item.memory.key for item in rank(svc, "Which city do we live in?").items}
    assert len(expired) == len(FACTS) - 1
    assert keys <= {memory.key for memory in expired}


def test_deleting_a_memory_deletes_its_vector(svc, alice):
    memory = svc.memories.find(_filter("alice"))[0]
    svc.memories.delete(memory.id)
    assert vector_count(svc) == len(FACTS) - 1


def city_similarity(svc) -> float:
    items = rank(svc, "Which city do we live in?").items
    return next((item.vec_score for item in items if item.memory.key == "city"), 0.0)


def test_changing_a_memory_replaces_its_vector(svc, alice):
    before = city_similarity(svc)
    city = next(m for m in svc.memories.find(_filter("alice")) if m.key == "city")
    with svc.db.write() as conn:  # our own transaction: no backfill starts before the check
        svc.memories.update(city.id, content="Our dog Max loves long walks", connection=conn)
        assert svc.vectors.count(conn) == len(FACTS) - 1, "the stale vector goes at once"
    svc.memories.notify_write()
    settle(svc)
    assert vector_count(svc) == len(FACTS)
    assert city_similarity(svc) < before - 0.1


def test_a_new_embedding_model_rebuilds_the_index(svc, alice):
    svc.memory_settings.update({"embeddingSource": "transformers", "transformersEnabled": True})
    # Run it here: until a run resets the index nothing is pending, so waiting would not wait.
    svc.backfill.run()
    with svc.db.read() as conn:
        assert svc.vectors.meta(conn).signature == "transformers:all-MiniLM-L6-v2:384"
    assert vector_count(svc) == len(FACTS)
    assert rank(svc, "Which programming language do I like?").items[0].memory.key == "lang"


def test_without_a_source_search_falls_back_to_keywords_and_says_why(svc, alice):
    svc.memory_settings.update({"staticEnabled": False})
    ranking = rank(svc, "Lisbon", strategy="hybrid")
    assert ranking.strategy_used == "keyword"
    assert "staticEnabled is false" in ranking.fallback_reason
    assert [item.memory.key for item in ranking.items] == ["city"]


@pytest.mark.sqlite_only
def test_int8_vectors_work_too(svc, alice):
    svc.vectors = svc.retriever.index = svc.backfill.index = SqliteVecIndex("int8")
    svc.memories.vectors = svc.vectors
    svc.backfill.run()
    with svc.db.read() as conn:
        assert svc.vectors.meta(conn).signature.endswith(":int8")
    assert rank(svc, "Which city do we live in?").items[0].memory.key == "city"


def _filter(owner):
    return MemoryFilter(api_key_id=owner)


def test_a_fact_from_a_chat_comes_back_by_meaning_through_the_proxy(engine_app, upstream):
    svc = engine_app.extensions["omniroute"]
    svc.providers.save("fake", {"base_url": upstream.base_url})
    _, secret = svc.keys.create("chat")
    client = engine_app.test_client()
    headers = {"Authorization": f"Bearer {secret}"}

    def chat(text: str):
        body = {"model": "fake/m", "messages": [{"role": "user", "content": text}]}
        return client.post("/v1/chat/completions", json=body, headers=headers)

    chat("I prefer TypeScript over Python.")
    assert eventually(lambda: vector_count(svc) == 1), "extracted and embedded within seconds"
    response = chat("Which programming language do I like?")  # no word in common
    assert response.headers["x-omniroute-memories"] == "1"
    assert '"I prefer TypeScript over Python"' in upstream.last_body["messages"][0]["content"]


def test_an_embedding_error_falls_back_to_keywords_and_says_why(app, upstream):
    svc = app.extensions["omniroute"]
    svc.providers.save(
        "fake",
        {
            "base_url": upstream.base_url,
            "api_key": "k",
            "embedding_models": [{"id": "fail-429", "dimensions": 8}],
        },
    )
    svc.memory_settings.update({"embeddingProviderModel": "fake/fail-429"})
    svc.memories.create(api_key_id="alice", key="city", content="We moved to Lisbon")
    progress = svc.backfill.run()
    assert progress.errors == 1 and "rate_limited" in progress.last_error
    ranking = rank(svc, "Lisbon", strategy="hybrid")
    assert ranking.strategy_used == "keyword"
    assert ranking.fallback_reason.startswith("embedding failed (rate_limited)")
    assert [item.memory.key for item in ranking.items] == ["city"]


def test_while_the_index_holds_another_models_vectors_search_uses_keywords(svc, alice):
    svc.memory_settings.update({"embeddingSource": "transformers", "transformersEnabled": True})
    with svc.backfill._lock:  # hold the backfill so the index stays on the old model
        ranking = rank(svc, "Lisbon", strategy="hybrid")
    assert ranking.strategy_used == "keyword"
    assert ranking.fallback_reason == "the vector index is being rebuilt for the current model"
    assert [item.memory.key for item in ranking.items] == ["city"]


def _falls_back_without_vectors(tmp_path, static_path, database_url, reason):
    """An app whose database cannot hold vectors: keyword search, and the reason, everywhere."""
    app = create_app(app_settings(tmp_path, database_url, MEMORY_STATIC_MODEL=str(static_path)))
    svc = app.extensions["omniroute"]
    svc.memory_settings.update({"staticEnabled": True})
    svc.memories.create(api_key_id="alice", key="city", content="We moved to Lisbon")
    assert svc.backfill.run().reason == reason
    ranking = rank(svc, "Lisbon", strategy="hybrid")
    assert ranking.fallback_reason == reason
    assert [item.memory.key for item in ranking.items] == ["city"]
    status = svc.engine_report()["vectorStore"]
    assert (status["available"], status["rowCount"]) == (False, 0)
    svc.close()


def test_without_sqlite_vec_search_uses_keywords_and_says_why(tmp_path, monkeypatch, static_path):
    monkeypatch.setattr(sqlite_vec, "load", lambda conn: (_ for _ in ()).throw(OSError("no vec")))
    _falls_back_without_vectors(tmp_path, static_path, None, "sqlite-vec is not available: no vec")


def test_on_postgresql_without_pgvector_search_uses_keywords_and_says_why(
    tmp_path, static_path, system_postgres
):
    reason = "pgvector is not available: this PostgreSQL server has no pgvector extension"
    _falls_back_without_vectors(tmp_path, static_path, system_postgres.url, reason)


def test_closing_the_services_stops_the_search_threads(svc, alice):
    rank(svc, "Lisbon", strategy="hybrid")  # the keyword half runs on a search thread

    def searching() -> list[threading.Thread]:
        return [t for t in threading.enumerate() if t.name.startswith("omniroute-search")]

    assert searching()
    svc.close()
    assert searching() == []


@pytest.mark.sqlite_only
def test_a_key_served_from_its_graph_never_returns_deleted_or_expired_memories(
    tmp_path, database_url, static_path
):
    config = app_settings(
        tmp_path,
        database_url,
        MEMORY_STATIC_MODEL=str(static_path),
        MEMORY_VEC_CACHE_MIN_VECTORS=2,
        MEMORY_VEC_GRAPH_MIN_VECTORS=2,
    )
    app = create_app(config)
    svc = app.extensions["omniroute"]
    try:
        svc.memory_settings.update(
            {"enabled": True, "staticEnabled": True, "embeddingSource": "static"}
        )
        for key, content in FACTS.items():
            svc.memories.create(api_key_id="alice", key=key, content=content)
        settle(svc)
        rank(svc, "Which city do we live in?")  # starts the build
        svc.vectors.cache.wait()
        graph = svc.vectors.cache._held["alice"]
        assert isinstance(graph, TenantGraph) and len(graph) == len(FACTS)
        assert (tmp_path / "vector_graphs").is_dir(), "saved in the process's data folder"
        city, dog = (next(m for m in svc.memories.find(_filter("alice")) if m.key == k)
                     for k in ("city", "dog"))  # fmt: skip
        assert rank(svc, "Which city do we live in?").items[0].memory.key == "city"
        svc.memories.update(city.id, expires_at="2000-01-01T00:00:00.000Z")
        svc.memories.delete(dog.id)
        for question in ("Which city do we live in?", "What is my dog called?"):
            keys = {item.memory.key for item in rank(svc, question).items}
            assert keys.isdisjoint({"city", "dog"})
    finally:
        svc.close()
