"""The `static` source: a model2vec StaticModel, and the offline build of the default one."""

from __future__ import annotations

import json
import logging
import threading
from pathlib import Path

import numpy as np

from omniroute.memory.embedding.base import normalised
from omniroute.memory.embedding.model_builds import ModelBuild, models_dir
from omniroute.memory.embedding.transformers_model import LOCAL_MODEL_PACKAGES, default_model_path

log = logging.getLogger(__name__)

DEFAULT_STATIC_NAME = "static-minilm-256"
DEFAULT_DIMENSIONS = 256


def _distill(folder: Path, dimensions: int = DEFAULT_DIMENSIONS) -> None:
    """Distill the packaged all-MiniLM-L6-v2 into a static model in `folder`: under a minute
    on two cores (bench/footprint.py)."""
    from model2vec.distill import distill  # torch: imported only when a build runs

    log.info("distilling the static embedding model into %s", folder)
    distill(model_name=default_model_path(), pca_dims=dimensions).save_pretrained(str(folder))


def is_static_model(path: Path) -> bool:
    return (path / "config.json").is_file() and (path / "model.safetensors").is_file()


STATIC_BUILD = ModelBuild(
    kind="static",
    name=DEFAULT_STATIC_NAME,
    write=_distill,
    is_ready=is_static_model,
    needs=(*LOCAL_MODEL_PACKAGES, "sklearn"),
    command="build-static",
)


def default_static_path(data_dir: str) -> Path:
    """Where the static model of a DATA_DIR is (without MEMORY_STATIC_CACHE_DIR)."""
    return STATIC_BUILD.path(models_dir({"DATA_DIR": data_dir}))


def build_default_static(data_dir: str) -> Path:
    """Distill the packaged all-MiniLM-L6-v2 into a static model under DATA_DIR/embeddings."""
    return STATIC_BUILD.build(models_dir({"DATA_DIR": data_dir}))


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
