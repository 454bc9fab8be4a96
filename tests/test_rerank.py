import pytest

from omniroute.memory.search import rerank
from omniroute.memory.settings import MemoryConfig
from tests.helpers import ADMIN_TOKEN

ADMIN = {"Authorization": f"Bearer {ADMIN_TOKEN}"}


@pytest.fixture
def svc(app, upstream):
    svc = app.extensions["omniroute"]
    svc.providers.save("rr", {"base_url": upstream.base_url, "api_key": "sk-rr"})
    for number, content in enumerate(["tea in the morning", "tea with milk", "green tea only"]):
        svc.memories.create(api_key_id="alice", key=f"k{number}", content=content)
    return svc


def ranked(svc, **settings):
    values = MemoryConfig.of({**svc.memory_settings.get().as_api(), **settings})
    ranking = svc.retriever.rank(
        api_key_id="alice", query="tea", settings=values, strategy="keyword"
    )
    return ranking, [item.memory.content for item in ranking.items]


def test_without_rerank_the_fused_order_stands(svc):
    ranking, order = ranked(svc)
    assert not ranking.rerank_applied and ranking.rerank_error is None
    assert len(order) == 3


def test_a_rerank_model_reorders_the_results(svc, upstream):
    before = ranked(svc)[1]
    ranking, after = ranked(svc, rerankEnabled=True, rerankProviderModel="rr/bge-reranker")
    assert ranking.rerank_applied
    assert after == list(reversed(before))
    assert ranking.items[0].score == 1.0
    sent = upstream.requests[-1]
    assert sent["path"] == "/v1/rerank"
    assert sent["body"] == {
        "model": "bge-reranker",
        "query": "tea",
        "documents": before,
        "top_n": 3,
    }
    assert sent["headers"]["Authorization"] == "Bearer sk-rr"


@pytest.mark.parametrize(
    ("model", "error"),
    [("rr/fail-500", "answered 500"), ("rr/slow", "did not answer"), ("nope/m", "no provider")],
)
def test_a_failing_rerank_keeps_the_order_and_says_why(svc, upstream, monkeypatch, model, error):
    monkeypatch.setattr(rerank, "TIMEOUT_SECONDS", 0.2)
    upstream.slow_seconds = 1.0
    before = ranked(svc)[1]
    ranking, after = ranked(svc, rerankEnabled=True, rerankProviderModel=model)
    assert after == before
    assert not ranking.rerank_applied and error in ranking.rerank_error


def test_preview_and_engine_status_report_the_rerank(client, svc):
    svc.memory_settings.update({"rerankEnabled": True, "rerankProviderModel": "rr/bge"})
    result = client.post(
        "/api/memory/retrieve-preview",
        json={"apiKeyId": "alice", "query": "tea", "strategy": "keyword"},
        headers=ADMIN,
    ).json
    assert result["resolution"]["rerankApplied"] is True
    status = client.get("/api/memory/engine-status", headers=ADMIN).json["rerank"]
    assert status == {
        "enabled": True,
        "model": "rr/bge",
        "provider": "rr",
        "available": True,
        "reason": None,
    }
