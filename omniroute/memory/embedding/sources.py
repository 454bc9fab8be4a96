"""Which embedding source serves now (REFERENCE section 6), with each model loaded once.

auto: `remote` when embeddingProviderModel names a provider with a key that lists that
embedding model (or customBaseUrl names a memory-only endpoint), else `multilingual` when
multilingualEnabled, else `static` when staticEnabled, else `transformers` when
transformersEnabled, else none (keyword search only). An explicit source is used only
when it is available; otherwise there is none, and the reason says why.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any

from omniroute.core.providers.client import ProviderClient
from omniroute.core.providers.registry import Provider, ProviderStore
from omniroute.memory.embedding.base import Embedder, EmbeddingError
from omniroute.memory.embedding.cache import CachedEmbedder
from omniroute.memory.embedding.model_builds import ModelBuild, models_dir
from omniroute.memory.embedding.multilingual_model import (
    MULTILINGUAL_BUILD,
    RUNTIME_PACKAGES,
    MultilingualEmbedder,
)
from omniroute.memory.embedding.remote import RemoteEmbedder
from omniroute.memory.embedding.shared_models import SharedModels
from omniroute.memory.embedding.static_model import STATIC_BUILD, StaticEmbedder
from omniroute.memory.embedding.transformers_model import (
    LOCAL_MODEL_PACKAGES,
    SLIM_INSTALL,
    TransformersEmbedder,
    missing_packages,
)
from omniroute.memory.settings import MemoryConfig

SOURCE_ORDER = {
    # auto: the provider model set, else the first provider with a key and an embedding
    # model (as the specification has it), then the local sources.
    "auto": ("remote", "provider", "multilingual", "static", "transformers"),
    "remote": ("remote",),
    "static": ("static",),
    "transformers": ("transformers",),
    "multilingual": ("multilingual",),
}


@dataclass(frozen=True)
class Resolution:
    embedder: CachedEmbedder | None
    reason: str | None = None


class EmbeddingSources:
    def __init__(
        self,
        config: Mapping[str, Any],
        providers: ProviderStore,
        client: ProviderClient,
        on_model_missing: Callable[[str], None] | None = None,
        shared: SharedModels | None = None,
    ) -> None:
        self._config = config
        self._providers = providers
        self._client = client
        self._on_model_missing = on_model_missing  # asks for a build, given its kind
        self._shared = shared  # models built by any process, kept in the database
        self._instances: dict[tuple, CachedEmbedder] = {}
        self._lock = threading.Lock()

    def resolve(self, settings: MemoryConfig) -> Resolution:
        reasons = []
        for source in SOURCE_ORDER[settings.embedding_source]:
            embedder, reason = getattr(self, f"_{source}")(settings)
            if embedder is not None:
                return Resolution(embedder)
            reasons.append(f"{source}: {reason}")
        return Resolution(None, "; ".join(reasons))

    def sized(self, embedder: CachedEmbedder, dim: int) -> tuple[CachedEmbedder | None, str]:
        """`embedder` making vectors of `dim`: itself when it does, its provider asked for
        that size when it is a provider's model, else None and why."""
        if embedder.dim == dim:
            return embedder, ""
        inner = embedder.inner
        if not isinstance(inner, RemoteEmbedder):
            return None, (
                f"{embedder.source} model {embedder.model} makes {embedder.dim}-dimensional "
                f"vectors and cannot be asked for {dim}; only a provider's model can"
            )
        key = ("sized", inner.model, dim, inner.provider.base_url, inner.provider.api_key)
        return self._cached(key, lambda: inner.sized(dim)), ""

    def static_state(self) -> dict:
        """The static model's build state on this disk, and whether the database has it."""
        return self._model_state(STATIC_BUILD, self.static_path())

    def multilingual_state(self) -> dict:
        return self._model_state(MULTILINGUAL_BUILD, self.multilingual_path())

    def _model_state(self, build: ModelBuild, path: Path) -> dict:
        shared = self._shared is not None and self._shared.has(path.name)
        return {**build.state(path), "inDatabase": shared}

    def static_path(self) -> Path:
        configured = self._config.get("MEMORY_STATIC_MODEL")
        return Path(configured) if configured else STATIC_BUILD.path(models_dir(self._config))

    def multilingual_path(self) -> Path:
        return MULTILINGUAL_BUILD.path(models_dir(self._config))

    def cache_stats(self) -> dict[str, int]:
        """Hits and misses of every embedder's cache in this process, summed."""
        with self._lock:
            stats = [embedder.stats() for embedder in self._instances.values()]
        return {name: sum(s[name] for s in stats) for name in ("hits", "misses")}

    def _cached(self, key: tuple, build: Callable[[], Embedder]) -> CachedEmbedder:
        with self._lock:
            if key not in self._instances:
                self._instances[key] = CachedEmbedder(
                    build(),
                    self._config["MEMORY_EMBEDDING_CACHE_MAX"],
                    self._config["MEMORY_EMBEDDING_CACHE_TTL_MS"] / 1000,
                )
            return self._instances[key]

    def _remote(self, settings):
        if settings.custom_base_url:
            return self._custom(settings)
        model = settings.embedding_provider_model
        if not model:
            return None, "no embeddingProviderModel is set"
        found = self._providers.for_model_ref(model)
        if found is None:
            return None, f"no provider for {model!r}"
        provider, bare = found
        if not provider.has_key:
            return None, f"provider {provider.id} has no API key"
        known = {m["id"]: m["dimensions"] for m in provider.embedding_models}
        if bare not in known:
            return None, f"provider {provider.id} lists no embedding model {bare!r}"
        key = ("remote", model, known[bare], provider.base_url, provider.api_key)
        return self._cached(key, lambda: self._remote_embedder(provider, bare, known[bare])), None

    def _provider(self, settings):
        """auto's second choice: the first provider (in id order) that has an API key and
        lists an embedding model, its first."""
        if settings.embedding_provider_model or settings.custom_base_url:
            return None, "embeddingProviderModel or customBaseUrl is set (see remote)"
        for provider in sorted(self._providers.list_providers(), key=lambda p: p.id):
            if provider.has_key and provider.embedding_models:
                model = provider.embedding_models[0]
                key = ("remote", f"{provider.id}/{model['id']}", model["dimensions"],
                       provider.base_url, provider.api_key)  # fmt: skip
                made = partial(self._remote_embedder, provider, model["id"], model["dimensions"])
                return self._cached(key, made), None
        return None, "no provider has an API key and an embedding model"

    def _custom(self, settings):
        """customBaseUrl (+ customModelId): a memory-only endpoint, with the selected provider's
        key when embeddingProviderModel names one; its dimension is probed once."""
        selected = settings.embedding_provider_model or ""
        provider_id, _, selected_model = selected.partition("/")
        registered = self._providers.get(provider_id) if provider_id else None
        model = settings.custom_model_id or selected_model
        if not model:
            return None, "customBaseUrl is set but neither customModelId nor a model is"
        provider = Provider(
            id="custom",
            base_url=settings.custom_base_url,
            api_key=registered.api_key if registered else None,
        )
        key = ("custom", provider.base_url, model, provider.api_key)
        with self._lock:
            known = self._instances.get(key)
        if known is not None:
            return known, None
        probe = self._remote_embedder(provider, model, dim=0)
        try:
            dim = probe.probe_dimensions()
        except EmbeddingError as exc:
            return None, f"custom endpoint failed ({exc.kind}): {exc}"
        return self._cached(key, lambda: self._remote_embedder(provider, model, dim)), None

    def _remote_embedder(self, provider: Provider, model: str, dim: int) -> RemoteEmbedder:
        return RemoteEmbedder(
            self._client,
            provider,
            model,
            dim,
            timeout=self._config["MEMORY_EMBEDDING_TIMEOUT_SECONDS"],
        )

    def _static(self, settings):
        if not settings.static_enabled:
            return None, "staticEnabled is false"
        path = self.static_path()
        configured = self._config.get("MEMORY_STATIC_MODEL")
        if configured and not STATIC_BUILD.is_ready(path):
            return None, f"no model2vec model at {path}"
        if reason := self._unbuilt(STATIC_BUILD, path):
            return None, reason
        return self._cached(("static", str(path)), lambda: StaticEmbedder(path)), None

    def _unbuilt(self, build: ModelBuild, path: Path) -> str | None:
        """Why the model `build` makes is not at `path` (None: it is). One another process
        built is restored from the database; else this install builds it in the background,
        when it can."""
        if not (build.is_ready(path) or build.is_building(path)) and self._shared:
            self._shared.restore(path)  # built by another process, perhaps on another disk
        if build.is_ready(path):
            return None
        if self._on_model_missing is None:
            return f"no {build.kind} model at {path}"
        if not build.can_build():
            return (
                f"no {build.kind} model here or in the database, and building one is "
                f"{SLIM_INSTALL}: run `flask --app app memory {build.command}` where it is"
            )
        if not build.is_building(path):
            self._on_model_missing(build.kind)
        return f"the {build.kind} model is being built into {path}"

    def _transformers(self, settings):
        if not settings.transformers_enabled:
            return None, "transformersEnabled is false"
        path = self._config.get("MEMORY_TRANSFORMERS_MODEL")
        # A model folder of one's own needs torch and transformers, the packaged one its package.
        if missing := missing_packages(LOCAL_MODEL_PACKAGES[:2] if path else LOCAL_MODEL_PACKAGES):
            return None, f"{', '.join(missing)}: {SLIM_INSTALL}"
        return self._cached(("transformers", path), lambda: TransformersEmbedder(path)), None

    def _multilingual(self, settings):
        if not settings.multilingual_enabled:
            return None, "multilingualEnabled is false"
        if missing := missing_packages(RUNTIME_PACKAGES):
            return None, f"{', '.join(missing)}: {SLIM_INSTALL}"
        path = self.multilingual_path()
        if reason := self._unbuilt(MULTILINGUAL_BUILD, path):
            return None, reason
        return self._cached(("multilingual",), lambda: MultilingualEmbedder(path)), None
