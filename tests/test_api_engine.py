import pytest

from omniroute.factory import create_app
from omniroute.memory.model import MemoryFilter
from omniroute.memory.search.tokens import count_tokens
from tests.helpers import ADMIN_TOKEN, app_settings, eventually

pytestmark = pytest.mark.both_stores

ADMIN = {"Authorization": f"Bearer {ADMIN_TOKEN}"}
FACTS = {
    "city": "We moved to Lisbon in spring",
    "lang": "I prefer TypeScript over Python",
    "dog": "My golden retriever is called Max",
}


@pytest.fixture
def svc(engine_app):
    return engine_app.extensions["omniroute"]


@pytest.fixture
def client(engine_app):
    return engine_app.test_client()


@pytest.fixture
def owner(svc):
    key, _ = svc.keys.create("engine")
    for name, content in FACTS.items():
        svc.memories.create(api_key_id=key.id, key=name, content=content)
    assert eventually(lambda: svc.backfill.pending() == 0 and not svc.backfill.progress.running)
    return key.id


def preview(client, owner, **body):
    return client.post(
        "/api/memory/retrieve-preview",
        json={"apiKeyId": owner, "query": "Which city do we live in?", **body},
        headers=ADMIN,
    )


def test_preview_shows_why_each_memory_ranks_where_it_does(client, owner, svc):
    response = preview(client, owner, strategy="hybrid")
    assert response.status_code == 200
    result = response.json
    first = result["memories"][0]
    # "city" is also the memory's key, which keyword search reads: both tiers found it.
    assert first["key"] == "city" and first["tier"] == "hybrid"
    assert first["vecScore"] > 0.4 and first["ftsScore"] > 0
    others = {m["key"]: m for m in result["memories"][1:]}
    assert all(m["tier"] == "vector" and m["ftsScore"] is None for m in others.values())
    assert first["tokens"] == count_tokens(svc.memories.get(first["id"]).content)
    assert first["injected"] is True
    assert result["resolution"] == {
        "embeddingSource": "static",
        "embeddingModel": "static-minilm-256",
        "vectorStore": svc.db.vectors.backend,
        "strategyUsed": "hybrid",
        "fusion": "blend",
        "relevanceFloor": 0.4,
        "rerankApplied": False,
        "rerankError": None,
        "fallbackReason": None,
    }
    assert result["budgetMaxTokens"] == 2000
    injected = [m for m in result["memories"] if m["injected"]]
    assert result["totalTokensUsed"] == sum(m["tokens"] for m in injected)


def test_preview_marks_what_fits_the_budget(client, owner):
    result = preview(client, owner, query="Lisbon TypeScript retriever", maxTokens=8).json
    assert [m["injected"] for m in result["memories"]] == [True, False, False]


def test_preview_with_keywords_only_and_no_access_counted(client, owner, svc):
    result = preview(client, owner, strategy="keyword", query="Lisbon").json
    assert [m["key"] for m in result["memories"]] == ["city"]
    assert result["memories"][0]["tier"] == "keyword"
    assert svc.memories.find(_all(owner))[0].access_count == 0


@pytest.mark.parametrize(
    ("change", "field"),
    [
        ({"query": ""}, "query"),
        ({"apiKeyId": None}, "apiKeyId"),
        ({"strategy": "magic"}, "strategy"),
        ({"maxTokens": 0}, "maxTokens"),
        ({"maxTokens": "8001"}, "maxTokens"),  # a number, not a string (8001 is clamped)
        ({"limit": 101}, "limit"),
        ({"extra": 1}, "extra"),
    ],
)
def test_preview_refuses_bad_input_naming_the_field(client, owner, change, field):
    body = {"apiKeyId": owner, "query": "x", **change}
    body = {k: v for k, v in body.items() if v is not None}
    response = client.post("/api/memory/retrieve-preview", json=body, headers=ADMIN)
    assert response.status_code == 422
    assert field in [d["field"] for d in response.json["error"]["details"]]


@pytest.mark.sqlite_only
def test_engine_status_probes_the_keyword_index(client, svc):
    with svc.db.write() as conn:
        conn.exec_driver_sql("DROP TABLE memory_fts")
    keyword = client.get("/api/memory/engine-status", headers=ADMIN).json["keyword"]
    assert keyword == {"available": False, "backend": "FTS5", "reason": "no such table: memory_fts"}


def test_engine_status_reports_every_part(client, owner, store_kind):
    status = client.get("/api/memory/engine-status", headers=ADMIN).json
    backend = {"sqlite": "FTS5", "postgresql": "tsvector"}[store_kind]
    assert status["keyword"] == {"available": True, "backend": backend, "reason": None}
    assert status["embedding"]["source"] == "static"
    assert status["embedding"]["dimensions"] == 256
    vectors = status["vectorStore"]
    assert vectors["available"] and vectors["rowCount"] == 3 and vectors["needsReindex"] == 0
    assert vectors["signature"] == "static:static-minilm-256:256"
    assert set(vectors["backfill"]) == {"running", "processed", "errors", "last_error", "reason"}


def test_embedding_providers_lists_models_and_keys(client, svc):
    svc.providers.save(
        "openai",
        {
            "base_url": "https://api.openai.com/v1",
            "api_key": "k",
            "embedding_models": [{"id": "text-embedding-3-small", "dimensions": 1536}],
        },
    )
    svc.providers.save("chat-only", {"base_url": "https://example.com/v1"})
    providers = client.get("/api/memory/embedding-providers", headers=ADMIN).json["providers"]
    assert providers == [
        {
            "provider": "openai",
            "hasKey": True,
            "models": [
                {
                    "id": "openai/text-embedding-3-small",
                    "name": "text-embedding-3-small",
                    "dimensions": 1536,
                }
            ],
        }
    ]


def test_reindex_with_force_embeds_everything_again(client, owner, svc):
    response = client.post("/api/memory/reindex", json={"force": True}, headers=ADMIN)
    assert response.status_code == 202
    assert response.json == {"started": True, "pending": 3}
    assert eventually(lambda: svc.backfill.pending() == 0)


def test_reindex_with_a_limit_embeds_at_most_that_many(client, owner, svc):
    response = client.post("/api/memory/reindex", json={"force": True, "limit": 2}, headers=ADMIN)
    assert response.status_code == 202 and response.json == {"started": True, "pending": 3}
    svc.jobs.wait(30)
    assert svc.backfill.pending() == 1
    client.post("/api/memory/reindex", json={"force": False}, headers=ADMIN)
    assert eventually(lambda: svc.backfill.pending() == 0)


@pytest.mark.parametrize(
    "body", [{}, {"force": "yes"}, {"force": True, "x": 1}, {"force": True, "limit": 0}]
)
def test_reindex_needs_a_strict_body(client, body):
    response = client.post("/api/memory/reindex", json=body, headers=ADMIN)
    assert response.status_code == 422


def test_the_reindex_command_shows_progress(engine_app, owner, svc):
    result = engine_app.test_cli_runner().invoke(args=["memory", "reindex", "--force"])
    assert result.exit_code == 0, result.output
    assert "embedded 3 of 3" in result.output
    assert svc.backfill.pending() == 0


def test_the_reindex_command_says_why_it_cannot(engine_app, owner, svc):
    svc.memory_settings.update({"staticEnabled": False})
    result = engine_app.test_cli_runner().invoke(args=["memory", "reindex", "--force"])
    assert result.exit_code == 1
    assert "staticEnabled is false" in result.output


def _all(owner):
    return MemoryFilter(api_key_id=owner)


@pytest.mark.slow  # distils the real model
def test_enabling_static_builds_its_model_then_embeds_in_the_background(app):
    """The first time static is enabled, the model is distilled (about 15 s), then used."""
    svc = app.extensions["omniroute"]
    svc.memories.create(api_key_id="alice", key="city", content="We moved to Lisbon")
    response = app.test_client().put(
        "/api/settings/memory", json={"staticEnabled": True}, headers=ADMIN
    )
    assert response.status_code == 200

    def status():
        return app.test_client().get("/api/memory/engine-status", headers=ADMIN).json

    assert eventually(lambda: status()["vectorStore"]["rowCount"] == 1, 180, interval=0.5)
    assert status()["embedding"]["source"] == "static"
    assert status()["embedding"]["staticModel"]["inDatabase"], "kept for every process"


def test_vector_store_disable_vec_keeps_retrieval_to_keywords(tmp_path, database_url, static_path):
    settings = app_settings(tmp_path, database_url, MEMORY_STATIC_MODEL=str(static_path),
                            VECTOR_STORE_DISABLE_VEC=True)  # fmt: skip
    app = create_app(settings)
    try:
        svc = app.extensions["omniroute"]
        svc.memory_settings.update({"enabled": True, "staticEnabled": True})
        key, _ = svc.keys.create("keywords only")
        svc.memories.create(api_key_id=key.id, key="city", content=FACTS["city"])
        client = app.test_client()
        vectors = client.get("/api/memory/engine-status", headers=ADMIN).json["vectorStore"]
        assert (vectors["available"], vectors["reason"], vectors["rowCount"]) == (
            False, "disabled by VECTOR_STORE_DISABLE_VEC", 0,
        )  # fmt: skip
        found = preview(client, key.id, query="Lisbon", strategy="semantic").json
        assert [m["key"] for m in found["memories"]] == ["city"]
        assert "disabled by VECTOR_STORE_DISABLE_VEC" in found["resolution"]["fallbackReason"]
    finally:
        app.extensions["omniroute"].close()
