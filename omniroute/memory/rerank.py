"""Optional rerank of retrieved memories by a provider's rerank model.

`POST {baseUrl}/rerank {model, query, documents, top_n}`, the Cohere/Jina format that vLLM,
TEI and others serve, with a 5 s timeout. The answer's `results[].index` order becomes the new
order (each item takes its `relevance_score`), items it leaves out follow in their old order.
Any failure keeps the fused order, and the reason is reported.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import httpx

from ..net import BlockedURL, check_base_url
from ..proxy.providers import ProviderStore

TIMEOUT_SECONDS = 5.0
MAX_DOCUMENTS = 50


class RerankFailed(RuntimeError):
    pass


class Reranker:
    def __init__(self, providers: ProviderStore, http: httpx.Client, allow_local: bool) -> None:
        self._providers = providers
        self._http = http
        self._allow_local = allow_local

    def model_for(self, settings: Mapping[str, Any]) -> str | None:
        if not settings["rerankEnabled"] or not settings["rerankProviderModel"]:
            return None
        return settings["rerankProviderModel"]

    def rerank(self, model: str, query: str, documents: list[str]) -> list[tuple[int, float]]:
        """Return (index into documents, relevance) best first; raise RerankFailed."""
        provider_id, _, bare = model.partition("/")
        provider = self._providers.get(provider_id)
        if provider is None or not bare:
            raise RerankFailed(f"no provider for rerank model {model!r}")
        try:
            base_url = check_base_url(provider.base_url, allow_local=self._allow_local)
        except BlockedURL as exc:
            raise RerankFailed(f"provider URL refused: {exc}") from None
        headers = {"Authorization": f"Bearer {provider.api_key}"} if provider.api_key else {}
        body = {"model": bare, "query": query, "documents": documents, "top_n": len(documents)}
        try:
            response = self._http.post(
                f"{base_url}/rerank", json=body, headers=headers, timeout=TIMEOUT_SECONDS
            )
        except httpx.TimeoutException:
            raise RerankFailed(f"{model} did not answer within {TIMEOUT_SECONDS:.0f} s") from None
        except httpx.HTTPError as exc:
            raise RerankFailed(f"{model}: {type(exc).__name__}") from None
        if response.status_code >= 400:
            raise RerankFailed(f"{model} answered {response.status_code}")
        try:
            results = response.json()["results"]
            ranked = [(int(r["index"]), float(r["relevance_score"])) for r in results]
        except (ValueError, KeyError, TypeError):
            raise RerankFailed(f"{model} sent no usable results") from None
        seen: set[int] = set()
        valid = []
        for index, score in ranked:
            if 0 <= index < len(documents) and index not in seen:
                seen.add(index)
                valid.append((index, score))
        return valid
