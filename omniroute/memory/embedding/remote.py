"""The `remote` source: a provider's OpenAI-compatible POST {baseUrl}/embeddings."""

from __future__ import annotations

import httpx
import numpy as np

from ...net import BlockedURL, check_base_url
from ...proxy.providers import Provider
from .base import EmbeddingError, normalised


class RemoteEmbedder:
    source = "remote"

    def __init__(
        self,
        client: httpx.Client,
        provider: Provider,
        model: str,
        dim: int,
        *,
        allow_local: bool,
        timeout: float,
    ) -> None:
        self._client = client
        self._provider = provider
        self._bare_model = model
        self.model = f"{provider.id}/{model}"
        self.dim = dim
        self._allow_local = allow_local
        self._timeout = timeout

    def probe_dimensions(self) -> int:
        """Embed one short text to learn the model's dimension (for custom endpoints)."""
        return self._post(["dimension probe"]).shape[1]

    def embed(self, texts: list[str]) -> np.ndarray:
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        vectors = self._post(texts)
        if vectors.shape != (len(texts), self.dim):
            raise EmbeddingError(
                "request_failed", f"{self.model} sent vectors of shape {vectors.shape}"
            )
        return normalised(vectors)

    def _post(self, texts: list[str]) -> np.ndarray:
        try:
            base_url = check_base_url(self._provider.base_url, allow_local=self._allow_local)
        except BlockedURL as exc:
            raise EmbeddingError("request_failed", f"provider URL refused: {exc}") from None
        headers = {"Content-Type": "application/json"}
        if self._provider.api_key:
            headers["Authorization"] = f"Bearer {self._provider.api_key}"
        try:
            response = self._client.post(
                f"{base_url}/embeddings",
                json={"model": self._bare_model, "input": texts},
                headers=headers,
                timeout=self._timeout,
            )
        except httpx.TimeoutException:
            raise EmbeddingError("timeout", f"{self.model} did not answer in time") from None
        except httpx.HTTPError as exc:
            raise EmbeddingError("request_failed", f"{self.model}: {type(exc).__name__}") from None
        if response.status_code in (401, 403):
            raise EmbeddingError("no_key", f"{self.model} refused the key ({response.status_code})")
        if response.status_code == 429:
            raise EmbeddingError("rate_limited", f"{self.model} is rate limited")
        if response.status_code >= 400:
            raise EmbeddingError("request_failed", f"{self.model} answered {response.status_code}")
        try:
            items = sorted(response.json()["data"], key=lambda item: item.get("index", 0))
            vectors = np.array([item["embedding"] for item in items], dtype=np.float32)
        except (ValueError, KeyError, TypeError):
            raise EmbeddingError("request_failed", f"{self.model} sent no embeddings") from None
        if vectors.ndim != 2 or len(vectors) != len(texts):
            raise EmbeddingError("request_failed", f"{self.model} sent {len(vectors)} vectors")
        return vectors
