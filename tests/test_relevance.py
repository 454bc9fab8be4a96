"""Fewer, better memories: the relevance floor (a share of the best score) and the blend's
keyword weight, as the retriever applies them and the gateway injects."""

from __future__ import annotations

import pytest

from omniroute.core.config import SETTINGS_BY_NAME, ConfigError, load_settings
from omniroute.memory.model import Memory
from omniroute.memory.search.fusion import Ranked, RetrievalOptions, fuse
from omniroute.memory.search.retrieval import Ranking
from tests.helpers import ADMIN_TOKEN

pytestmark = pytest.mark.both_stores


def memory(key: str) -> Memory:
    return Memory(id=key, api_key_id="alice", session_id="", type="factual", key=key,
                  content=key, metadata={}, created_at="", updated_at="")  # fmt: skip


def ranked(*scores: float) -> Ranking:
    return Ranking([Ranked(memory(f"m{n}"), score, "hybrid") for n, score in enumerate(scores)])


def keys(memories: list[Memory]) -> list[str]:
    return [m.key for m in memories]


def test_the_floor_keeps_what_scores_near_the_best():
    ranking = ranked(0.9, 0.5, 0.44, 0.1)
    assert keys(ranking.relevant(0.5)) == ["m0", "m1"]
    assert keys(ranking.relevant(0.0)) == ["m0", "m1", "m2", "m3"]
    assert keys(ranking.relevant(1.0)) == ["m0"]


def test_a_ranking_without_positive_scores_keeps_everything():
    assert keys(ranked(0.0, 0.0).relevant(0.5)) == ["m0", "m1"], "recent: no scores"
    assert keys(ranked(-1.0, -3.0).relevant(0.5)) == ["m0", "m1"], "logits"
    assert Ranking().relevant(0.5) == []


def test_the_blend_weight_decides_between_the_two_sides():
    a, b = memory("a"), memory("b")
    keyword, vector = [(a, 9.0), (b, 1.0)], [(b, 0.9), (a, 0.3)]
    assert fuse(keyword, vector, RetrievalOptions(blend_weight=1.0))[0].memory.key == "a"
    assert fuse(keyword, vector, RetrievalOptions(blend_weight=0.0))[0].memory.key == "b"
    scores = [i.score for i in fuse(keyword, vector, RetrievalOptions(blend_weight=0.7))]
    assert scores == pytest.approx([0.7, 0.3])


def test_unless_set_the_blend_is_the_vector_sources_own():
    a, b = memory("a"), memory("b")
    keyword, vector = [(a, 9.0), (b, 1.0)], [(b, 0.9), (a, 0.3)]
    static = [i.score for i in fuse(keyword, vector, RetrievalOptions(), "static")]
    multilingual = [i.score for i in fuse(keyword, vector, RetrievalOptions(), "multilingual")]
    assert static == pytest.approx([0.7, 0.3]) and multilingual == pytest.approx([0.5, 0.5])
    chosen = RetrievalOptions(blend_weight=0.9)
    assert [i.score for i in fuse(keyword, vector, chosen, "multilingual")] == pytest.approx(
        [0.9, 0.1]
    )


def test_the_settings_defaults_are_the_engines():
    defaults = RetrievalOptions()
    assert SETTINGS_BY_NAME["MEMORY_BLEND_KEYWORD_WEIGHT"].default == defaults.blend_weight
    assert SETTINGS_BY_NAME["MEMORY_RELEVANCE_FLOOR"].default == defaults.relevance_floor
    assert SETTINGS_BY_NAME["MEMORY_VEC_TOP_K"].default == defaults.top_k


@pytest.mark.parametrize("raw", ["-0.1", "1.5", "nan", "half"])
def test_a_floor_that_is_not_a_share_is_refused_at_start(raw):
    with pytest.raises(ConfigError, match="MEMORY_RELEVANCE_FLOOR"):
        load_settings({"MEMORY_RELEVANCE_FLOOR": raw})
    assert load_settings({"MEMORY_RELEVANCE_FLOOR": "0.4"})["MEMORY_RELEVANCE_FLOOR"] == 0.4


def test_the_gateway_injects_only_what_clears_the_floor(make_app, upstream, database_url):
    app = make_app(MEMORY_RELEVANCE_FLOOR=0.6, DATABASE_URL=database_url)
    svc = app.extensions["omniroute"]
    key, secret = svc.keys.create("alice")
    svc.memories.create(api_key_id=key.id, key="lang", content="I write TypeScript in Neovim")
    svc.memories.create(
        api_key_id=key.id, key="note", content="Somewhere in a long list of chores, tools and "
        "errands there was also the word neovim, once, among many other words of the day"
    )  # fmt: skip
    client = app.test_client()
    answer = client.post(
        "/v1/chat/completions",
        json={"model": "fake/m", "messages": [{"role": "user", "content": "TypeScript neovim?"}]},
        headers={"Authorization": f"Bearer {secret}"},
    )
    assert answer.status_code == 200 and answer.headers["x-omniroute-memories"] == "1"
    assert "I write TypeScript" in upstream.last_body["messages"][0]["content"]
    preview = client.post(
        "/api/memory/retrieve-preview",
        json={"apiKeyId": key.id, "query": "TypeScript neovim?", "strategy": "hybrid"},
        headers={"Authorization": f"Bearer {ADMIN_TOKEN}"},
    ).json
    shown = {m["key"]: (m["injected"], m["belowFloor"]) for m in preview["memories"]}
    assert shown == {"lang": (True, False), "note": (False, True)}
    assert preview["resolution"]["relevanceFloor"] == 0.6
