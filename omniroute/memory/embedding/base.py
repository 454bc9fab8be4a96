"""What every embedding source provides, and how its failures are named."""

from __future__ import annotations

from typing import Protocol

import numpy as np

ERROR_KINDS = ("no_key", "rate_limited", "request_failed", "timeout", "unavailable")


class EmbeddingError(RuntimeError):
    """Embedding failed; `kind` is one of ERROR_KINDS."""

    def __init__(self, kind: str, message: str) -> None:
        super().__init__(message)
        self.kind = kind


class Embedder(Protocol):
    source: str
    model: str
    dim: int

    def embed(self, texts: list[str], *, query: bool = False) -> np.ndarray:
        """Return one unit-length float32 row per text. `query`: the texts are search
        queries, not memories (an asymmetric model such as e5 embeds the two apart; the
        others ignore it)."""


def normalised(vectors: np.ndarray) -> np.ndarray:
    vectors = np.asarray(vectors, dtype=np.float32)
    norms = np.linalg.norm(vectors, axis=1, keepdims=True)
    return vectors / np.maximum(norms, 1e-12)


def signature(embedder: Embedder, quantization: str = "none") -> str:
    """`{source}:{model}:{dim}[:int8]`: what a stored vector was made with."""
    suffix = ":int8" if quantization == "int8" else ""
    return f"{embedder.source}:{embedder.model}:{embedder.dim}{suffix}"
