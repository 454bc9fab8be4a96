"""Optional rerank of retrieved memories by a provider's rerank model.

`POST {baseUrl}/rerank {model, query, documents, top_n}`, the Cohere/Jina format that vLLM,
TEI and others serve, with a 5 s timeout. The answer's `results[].index` order becomes the new
order (each item takes its `relevance_score`), items it leaves out follow in their old order.
Any failure keeps the fused order, and the reason is reported.
"""

from __future__ import annotations

from typing import Any

from omniroute.core.providers.client import TIMEOUT, ProviderClient, ProviderError
from omniroute.core.providers.registry import ProviderStore
from omniroute.memory.settings import MemoryConfig

TIMEOUT_SECONDS = 5.0
MAX_DOCUMENTS = 50


class RerankFailed(RuntimeError):
    pass


class Reranker:
    def __init__(self, providers: ProviderStore, client: ProviderClient) -> None:
        self._providers = providers
        self._client = client

    def model_for(self, settings: MemoryConfig) -> str | None:
        if not settings.rerank_enabled or not settings.rerank_provider_model:
            return None
        return settings.rerank_provider_model

    def status(self, settings: MemoryConfig) -> dict[str, Any]:
        """Whether rerank would run with these settings, and why not."""
        model = settings.rerank_provider_model
        found = self._providers.for_model_ref(model) if model else None
        reason = None
        if not settings.rerank_enabled:
            reason = "rerankEnabled is false"
        elif not model:
            reason = "no rerankProviderModel is set"
        elif found is None:
            reason = f"no provider for {model!r}"
        return {
            "enabled": settings.rerank_enabled,
            "model": model,
            "provider": found[0].id if found else None,
            "available": reason is None,
            "reason": reason,
        }

    def rerank(self, model: str, query: str, documents: list[str]) -> list[tuple[int, float]]:
        """Return (index into documents, relevance) best first; raise RerankFailed."""
        found = self._providers.for_model_ref(model)
        if found is None:
            raise RerankFailed(f"no provider for rerank model {model!r}")
        provider, bare = found
        body = {"model": bare, "query": query, "documents": documents, "top_n": len(documents)}
        try:
            answer = self._client.post_json(provider, "/rerank", body, timeout=TIMEOUT_SECONDS)
        except ProviderError as exc:
            if exc.kind == TIMEOUT:
                raise RerankFailed(
                    f"{model} did not answer within {TIMEOUT_SECONDS:.0f} s"
                ) from None
            raise RerankFailed(f"{model}: {exc.message}") from None
        try:
            ranked = [(int(r["index"]), float(r["relevance_score"])) for r in answer["results"]]
        except (KeyError, TypeError, ValueError):
            raise RerankFailed(f"{model} sent no usable results") from None
        seen: set[int] = set()
        valid = []
        for index, score in ranked:
            if 0 <= index < len(documents) and index not in seen:
                seen.add(index)
                valid.append((index, score))
        return valid
