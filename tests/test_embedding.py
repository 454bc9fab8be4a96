"""Embedding sources with the real packaged models, the cache, and the remote source."""

import io
import time
import zipfile

import httpx
import numpy as np
import pytest
from sqlalchemy import insert

from omniroute.core.config import load_settings
from omniroute.core.db.tables import model_files
from omniroute.core.providers.client import ProviderClient
from omniroute.core.providers.registry import Provider
from omniroute.factory import create_app
from omniroute.memory.embedding.base import EmbeddingError, signature
from omniroute.memory.embedding.cache import CachedEmbedder
from omniroute.memory.embedding.model_builds import BuildInProgress
from omniroute.memory.embedding.remote import RemoteEmbedder
from omniroute.memory.embedding.sources import EmbeddingSources
from omniroute.memory.embedding.static_model import (
    STATIC_BUILD,
    StaticEmbedder,
    build_default_static,
)
from omniroute.memory.embedding.transformers_model import TransformersEmbedder
from omniroute.memory.settings import MemoryConfig
from tests.fake_upstream import EMBEDDING_DIMENSIONS, fake_embedding

TEXTS = ["I love my dog", "Puppies are wonderful pets", "The quarterly tax return is due"]


def cosine(a, b) -> float:
    return float(np.dot(a, b))


def assert_means_what_it_says(vectors) -> None:
    assert np.allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)
    assert cosine(vectors[0], vectors[1]) > cosine(vectors[0], vectors[2]) + 0.1


@pytest.fixture(scope="session")
def transformers_embedder():
    return TransformersEmbedder()


def test_the_packaged_minilm_embeds_by_meaning(transformers_embedder):
    vectors = transformers_embedder.embed(TEXTS)
    assert vectors.shape == (3, 384) and vectors.dtype == np.float32
    assert_means_what_it_says(vectors)
    assert signature(transformers_embedder) == "transformers:all-MiniLM-L6-v2:384"


def test_a_distilled_static_model_embeds_by_meaning(static_path):
    embedder = StaticEmbedder(static_path)
    vectors = embedder.embed(TEXTS)
    assert vectors.shape == (3, 256)
    assert_means_what_it_says(vectors)
    assert signature(embedder, "int8") == "static:static-minilm-256:256:int8"


class Counting:
    source, model, dim = "fake", "counting", 2

    def __init__(self):
        self.calls: list[list[str]] = []

    def embed(self, texts, *, query=False):
        self.calls.append(list(texts))
        return np.array([[len(t), 1.0] for t in texts], dtype=np.float32)


def test_the_cache_embeds_only_what_it_has_not_seen():
    inner = Counting()
    cached = CachedEmbedder(inner, max_entries=10, ttl_seconds=60)
    first = cached.embed(["a", "bb"])
    second = cached.embed(["bb", "ccc", "a"])
    assert inner.calls == [["a", "bb"], ["ccc"]]
    assert np.array_equal(second[0], first[1]) and np.array_equal(second[2], first[0])
    assert cached.stats() == {"hits": 2, "misses": 3, "size": 3}


def test_the_cache_forgets_after_its_time_and_beyond_its_size():
    inner = Counting()
    cached = CachedEmbedder(inner, max_entries=2, ttl_seconds=60)
    cached.embed(["a", "b", "c"])
    cached.embed(["a"])
    assert inner.calls[-1] == ["a"], "the oldest entry went when the cache was full"
    short = CachedEmbedder(inner, max_entries=10, ttl_seconds=0.001)
    short.embed(["x"])
    time.sleep(0.01)
    short.embed(["x"])
    assert inner.calls[-2:] == [["x"], ["x"]]


@pytest.fixture
def remote(upstream):
    client = httpx.Client()

    def make(model: str = "embed-small", timeout: float = 5.0) -> RemoteEmbedder:
        provider = Provider(id="fake", base_url=upstream.base_url, api_key="sk-emb")
        return RemoteEmbedder(
            ProviderClient(client, allow_local=True),
            provider,
            model,
            EMBEDDING_DIMENSIONS,
            timeout=timeout,
        )

    yield make
    client.close()


def test_the_remote_source_posts_to_embeddings(remote, upstream):
    vectors = remote().embed(["hello", "world"])
    expected = np.array([fake_embedding("hello"), fake_embedding("world")])
    expected /= np.linalg.norm(expected, axis=1, keepdims=True)
    assert np.allclose(vectors, expected, atol=1e-6)
    received = upstream.requests[-1]
    assert received["path"] == "/v1/embeddings"
    assert received["body"] == {"model": "embed-small", "input": ["hello", "world"]}
    assert received["headers"]["Authorization"] == "Bearer sk-emb"


@pytest.mark.parametrize(
    ("model", "kind"), [("fail-401", "no_key"), ("fail-429", "rate_limited"), ("slow", "timeout")]
)
def test_remote_failures_are_classified(remote, upstream, model, kind):
    upstream.slow_seconds = 1.0
    with pytest.raises(EmbeddingError) as caught:
        remote(model, timeout=0.2).embed(["x"])
    assert caught.value.kind == kind


def test_a_refused_connection_is_a_failed_request(upstream):
    provider = Provider(id="down", base_url="http://127.0.0.1:1/v1", api_key="k")
    client = ProviderClient(httpx.Client(), allow_local=True)
    embedder = RemoteEmbedder(client, provider, "m", 8, timeout=1)
    with pytest.raises(EmbeddingError) as caught:
        embedder.embed(["x"])
    assert caught.value.kind == "request_failed"


@pytest.fixture
def sources(tmp_path, svc, static_path):
    config = {**load_settings({}), "DATA_DIR": str(tmp_path), "MEMORY_STATIC_MODEL": None}
    built = []

    def make(**overrides):
        return EmbeddingSources(
            {**config, **overrides}, svc.providers, svc.provider_client, built.append
        ), built

    return make


def settings(**changes):
    return MemoryConfig.of(changes)


def test_auto_prefers_a_remote_model_with_a_key(sources, svc, upstream):
    svc.providers.save(
        "fake",
        {
            "base_url": upstream.base_url,
            "api_key": "k",
            "embedding_models": [{"id": "e", "dimensions": EMBEDDING_DIMENSIONS}],
        },
    )
    registry, _ = sources()
    chosen = registry.resolve(settings(embeddingProviderModel="fake/e", transformersEnabled=True))
    assert (chosen.embedder.source, chosen.embedder.model) == ("remote", "fake/e")
    svc.providers.save("fake", {"api_key": None})
    fallback = registry.resolve(settings(embeddingProviderModel="fake/e", transformersEnabled=True))
    assert fallback.embedder.source == "transformers"


def test_auto_without_a_model_takes_the_first_provider_with_a_key_and_an_embedding_model(
    sources, svc, upstream
):
    embedding = [{"id": "e", "dimensions": EMBEDDING_DIMENSIONS}]
    svc.providers.save("a-keyless", {"base_url": upstream.base_url, "embedding_models": embedding})
    svc.providers.save("b-chat-only", {"base_url": upstream.base_url, "api_key": "k"})
    svc.providers.save(
        "c-fake", {"base_url": upstream.base_url, "api_key": "k", "embedding_models": embedding}
    )
    registry, _ = sources()
    chosen = registry.resolve(settings(transformersEnabled=True))
    assert (chosen.embedder.source, chosen.embedder.model) == ("remote", "c-fake/e")
    assert chosen.embedder.embed(["hello"])[0].shape == (EMBEDDING_DIMENSIONS,)
    # Named as the source, remote still needs its model: no provider is guessed.
    named = registry.resolve(settings(embeddingSource="remote"))
    assert named.embedder is None and "no embeddingProviderModel" in named.reason
    svc.providers.save("c-fake", {"api_key": None})
    assert registry.resolve(settings(transformersEnabled=True)).embedder.source == "transformers"


def test_auto_takes_static_then_transformers_then_nothing(sources, static_path):
    registry, built = sources(MEMORY_STATIC_MODEL=str(static_path))
    assert registry.resolve(settings(staticEnabled=True)).embedder.source == "static"
    assert registry.resolve(settings(transformersEnabled=True)).embedder.source == "transformers"
    nothing = registry.resolve(settings())
    assert nothing.embedder is None
    assert "staticEnabled is false" in nothing.reason
    assert "transformersEnabled is false" in nothing.reason


def test_a_missing_default_static_model_is_built_in_the_background(sources):
    registry, built = sources()
    chosen = registry.resolve(settings(embeddingSource="static", staticEnabled=True))
    assert chosen.embedder is None and "being built" in chosen.reason
    assert built == ["static"]


def test_each_model_is_loaded_once_per_process(sources):
    registry, _ = sources()
    first = registry.resolve(settings(transformersEnabled=True)).embedder
    assert registry.resolve(settings(transformersEnabled=True)).embedder is first


def test_the_static_build_state_is_read_from_disk(tmp_path, static_path):
    target = tmp_path / "embeddings" / "static-minilm-256"
    assert STATIC_BUILD.state(target)["state"] == "missing"
    (tmp_path / "embeddings" / "static-minilm-256.building").mkdir(parents=True)
    building = STATIC_BUILD.state(target)
    assert building["state"] == "building" and building["buildingSince"].endswith("Z")
    assert STATIC_BUILD.state(static_path)["state"] == "ready"


def test_a_custom_endpoint_uses_the_selected_providers_key_and_probes_its_size(
    sources, svc, upstream
):
    svc.providers.save("fake", {"base_url": "https://api.example.com/v1", "api_key": "sk-sel"})
    registry, _ = sources()
    chosen = registry.resolve(
        settings(
            embeddingProviderModel="fake/ignored",
            customBaseUrl=upstream.base_url,
            customModelId="bge-small",
        )
    )
    embedder = chosen.embedder
    assert (embedder.source, embedder.model, embedder.dim) == ("remote", "custom/bge-small", 8)
    assert upstream.requests[-1]["headers"]["Authorization"] == "Bearer sk-sel"
    assert embedder.embed(["hello"]).shape == (1, 8)
    registry.resolve(
        settings(
            embeddingProviderModel="fake/x",
            customBaseUrl=upstream.base_url,
            customModelId="bge-small",
        )
    )
    probes = [r for r in upstream.requests if r["body"].get("input") == ["dimension probe"]]
    assert len(probes) == 1, "the dimension is probed once"


def test_a_failing_custom_endpoint_is_no_source_with_its_reason(sources, upstream):
    registry, _ = sources()
    chosen = registry.resolve(settings(customBaseUrl=upstream.base_url, customModelId="fail-401"))
    assert chosen.embedder is None and "custom endpoint failed (no_key)" in chosen.reason


def test_only_one_static_build_runs_at_a_time(tmp_path):
    (tmp_path / "embeddings" / "static-minilm-256.building").mkdir(parents=True)
    with pytest.raises(BuildInProgress):
        build_default_static(str(tmp_path))


def test_a_static_model_built_by_one_process_reaches_another_on_its_own_disk(tmp_path, static_path):
    # A worker on another machine built it: the web process has only the database in common.
    def process(name: str):
        database = f"sqlite:///{tmp_path / 'shared.db'}"
        config = {"DATA_DIR": str(tmp_path / name), "DATABASE_URL": database}
        return create_app({**config, "OMNIROUTE_ADMIN_TOKEN": "t"})

    worker = process("worker")
    worker.extensions["omniroute"].shared_models.publish(static_path)
    web = process("web")
    svc = web.extensions["omniroute"]
    chosen = svc.embeddings.resolve(settings(staticEnabled=True, embeddingSource="static"))
    assert chosen.embedder is not None and chosen.embedder.source == "static", chosen.reason
    folder = tmp_path / "web" / "embeddings" / static_path.name
    assert (folder / "model.safetensors").is_file()
    assert not folder.with_name(folder.name + ".building").exists(), "nothing was built"
    assert svc.embeddings.static_state() == {
        "state": "ready",
        "path": str(folder),
        "buildingSince": None,
        "inDatabase": True,
    }
    assert chosen.embedder.embed(["Lisbon"]).shape == (1, 256)
    for app in (worker, web):
        app.extensions["omniroute"].close()


def test_a_model_archive_cannot_write_outside_its_folder(svc, tmp_path):
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        archive.writestr("../escaped.txt", "nope")
    with svc.db.write() as conn:
        conn.execute(
            insert(model_files).values(name="evil", archive=buffer.getvalue(), created_at="x")
        )
    with pytest.raises(ValueError, match="unsafe path"):
        svc.shared_models.restore(tmp_path / "models" / "evil")
    assert not (tmp_path / "models" / "escaped.txt").exists()
    assert not (tmp_path / "escaped.txt").exists()


def test_memory_static_cache_dir_holds_the_built_models(sources, tmp_path):
    folder = tmp_path / "models"
    registry, built = sources(MEMORY_STATIC_CACHE_DIR=str(folder))
    assert registry.static_path() == folder / "static-minilm-256"
    assert registry.multilingual_path().parent == folder
    chosen = registry.resolve(settings(embeddingSource="static", staticEnabled=True))
    assert chosen.embedder is None and str(folder) in chosen.reason
