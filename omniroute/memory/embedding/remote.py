"""The `remote` source: a provider's OpenAI-compatible POST {baseUrl}/embeddings."""

from __future__ import annotations

import numpy as np

from omniroute.core.providers.client import (
    NO_KEY,
    RATE_LIMITED,
    TIMEOUT,
    ProviderClient,
    ProviderError,
)
from omniroute.core.providers.registry import Provider
from omniroute.memory.embedding.base import EmbeddingError, normalised

# How each failure of the call reads as an embedding error's kind.
ERROR_KINDS = {NO_KEY: "no_key", RATE_LIMITED: "rate_limited", TIMEOUT: "timeout"}


class RemoteEmbedder:
    source = "remote"

    def __init__(
        self,
        client: ProviderClient,
        provider: Provider,
        model: str,
        dim: int,
        *,
        timeout: float,
        asked_dimensions: bool = False,
    ) -> None:
        self._client = client
        self.provider = provider
        self._bare_model = model
        self.model = f"{provider.id}/{model}"
        self.dim = dim
        self._timeout = timeout
        self._asked_dimensions = asked_dimensions  # send `dimensions`: dim is not the model's

    def sized(self, dim: int) -> RemoteEmbedder:
        """This model asked for vectors of `dim` (OpenAI's `dimensions`: text-embedding-3
        shortens its vectors; a model that cannot is refused by its provider)."""
        return RemoteEmbedder(
            self._client, self.provider, self._bare_model, dim,
            timeout=self._timeout, asked_dimensions=True,
        )  # fmt: skip

    def probe_dimensions(self) -> int:
        """Embed one short text to learn the model's dimension (for custom endpoints)."""
        return self._post(["dimension probe"]).shape[1]

    def embed(self, texts: list[str], *, query: bool = False) -> np.ndarray:
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        vectors = self._post(texts)
        if vectors.shape != (len(texts), self.dim):
            raise EmbeddingError(
                "request_failed", f"{self.model} sent vectors of shape {vectors.shape}"
            )
        return normalised(vectors)

    def _post(self, texts: list[str]) -> np.ndarray:
        body = {"model": self._bare_model, "input": texts}
        if self._asked_dimensions:
            body["dimensions"] = self.dim
        try:
            answer = self._client.post_json(
                self.provider, "/embeddings", body, timeout=self._timeout
            )
        except ProviderError as exc:
            kind = ERROR_KINDS.get(exc.kind, "request_failed")
            raise EmbeddingError(kind, f"{self.model}: {exc.message}") from None
        try:
            items = sorted(answer["data"], key=lambda item: item.get("index", 0))
            vectors = np.array([item["embedding"] for item in items], dtype=np.float32)
        except (KeyError, TypeError, ValueError, AttributeError):
            raise EmbeddingError("request_failed", f"{self.model} sent no embeddings") from None
        if vectors.ndim != 2 or len(vectors) != len(texts):
            raise EmbeddingError("request_failed", f"{self.model} sent {len(vectors)} vectors")
        return vectors
