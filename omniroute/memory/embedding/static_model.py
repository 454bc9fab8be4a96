"""The `static` source: a model2vec StaticModel, and the offline build of the default one."""

from __future__ import annotations

import json
import logging
import shutil
import threading
import time
from datetime import UTC, datetime
from pathlib import Path

import numpy as np

from omniroute.core.clock import to_iso
from omniroute.memory.embedding.base import normalised
from omniroute.memory.embedding.transformers_model import (
    LOCAL_MODEL_PACKAGES,
    default_model_path,
    missing_packages,
)

log = logging.getLogger(__name__)

DEFAULT_STATIC_NAME = "static-minilm-256"
DEFAULT_DIMENSIONS = 256
# A half-built model older than this is a build that died: it is cleared and built again.
STALE_BUILD_SECONDS = 600


class BuildInProgress(RuntimeError):
    """Another process or thread is building the static model right now."""


def can_distill() -> bool:
    """Whether this install can build the static model (the slim one cannot)."""
    return not missing_packages((*LOCAL_MODEL_PACKAGES, "sklearn"))


def default_static_path(data_dir: str) -> Path:
    return Path(data_dir).resolve() / "embeddings" / DEFAULT_STATIC_NAME


def build_default_static(data_dir: str, dimensions: int = DEFAULT_DIMENSIONS) -> Path:
    """Distill the packaged all-MiniLM-L6-v2 into a static model under DATA_DIR/embeddings.

    Under a minute on two cores (bench/footprint.py). Written to a temporary folder and
    renamed into place, so a half-built model is never loaded.
    """
    target = default_static_path(data_dir)
    partial = _partial(target)
    if partial.exists() and time.time() - partial.stat().st_mtime > STALE_BUILD_SECONDS:
        shutil.rmtree(partial, ignore_errors=True)
    partial.parent.mkdir(parents=True, exist_ok=True)
    try:
        partial.mkdir()  # fails while another build holds it: one build at a time
    except FileExistsError:
        raise BuildInProgress(f"{partial} is being built") from None
    try:
        from model2vec.distill import distill  # torch: imported only when a build runs

        log.info("distilling the static embedding model into %s", target)
        model = distill(model_name=default_model_path(), pca_dims=dimensions)
        model.save_pretrained(str(partial))
    except BaseException:  # a failed build (no torch, say) leaves no folder to wait for
        shutil.rmtree(partial, ignore_errors=True)
        raise
    shutil.rmtree(target, ignore_errors=True)
    partial.rename(target)
    return target


def _partial(target: Path) -> Path:
    return target.with_name(target.name + ".building")


def is_building(target: Path) -> bool:
    return build_state(target)["state"] == "building"


def build_state(target: Path) -> dict[str, str | None]:
    """ready, building (with its start) or missing: read from disk, so any process sees it."""
    partial = _partial(target)
    if is_static_model(target):
        return {"state": "ready", "path": str(target), "buildingSince": None}
    if partial.exists():
        since = datetime.fromtimestamp(partial.stat().st_mtime, UTC)
        return {"state": "building", "path": str(target), "buildingSince": to_iso(since)}
    return {"state": "missing", "path": str(target), "buildingSince": None}


def is_static_model(path: Path) -> bool:
    return (path / "config.json").is_file() and (path / "model.safetensors").is_file()


class StaticEmbedder:
    source = "static"

    def __init__(self, path: Path) -> None:
        self.path = path
        self.model = path.name
        self.dim = int(json.loads((path / "config.json").read_text())["hidden_dim"])
        self._model = None
        self._lock = threading.Lock()

    def embed(self, texts: list[str], *, query: bool = False) -> np.ndarray:
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        # One call at a time: encode sets the tokenizer's truncation, and a Rust tokenizer
        # changed while another thread uses it fails ("Already borrowed").
        with self._lock:
            if self._model is None:
                from model2vec import StaticModel

                self._model = StaticModel.from_pretrained(str(self.path))
            return normalised(self._model.encode(texts, show_progress_bar=False))
