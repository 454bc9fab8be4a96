"""Whether the database can hold vectors (sqlite-vec loaded, pgvector installed), and why not."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class VectorSupport:
    backend: str  # "sqlite-vec" or "pgvector": the name reports show
    available: bool = False
    version: str | None = None
    error: str | None = None

    @property
    def label(self) -> str:
        """What holds the vectors, as reports name it: "sqlite-vec v0.1.9" or why none does."""
        if self.available:
            return f"{self.backend} {self.version}"
        return f"{self.backend} unavailable: {self.error}"
