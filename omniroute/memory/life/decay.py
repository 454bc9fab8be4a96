"""Typed decay (the reference's MEMORY_TYPED_DECAY_*): episodic memories fade with age.

An episodic memory ("I chose Postgres") is about a moment; facts, procedures and summaries
are not, and never decay. With decay on:

- in ranking, an episodic memory's score is multiplied by 0.5 ** (age / episodic_days),
  where age counts from its last injection, else its creation: half weight at the age the
  sweep deletes it, so a fresh decision outranks an old one of the same relevance;
- the retention sweep deletes episodic memories older than `episodic_days` that way;
- a memory injected at least `access_immunity` times is immune to both: it proved useful.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import ColumnElement, func

from omniroute.core.clock import to_iso
from omniroute.core.db.tables import memories
from omniroute.memory.model import Memory

DECAYING_TYPE = "episodic"


@dataclass(frozen=True)
class DecayPolicy:
    enabled: bool = False
    episodic_days: int = 30
    access_immunity: int = 3

    @classmethod
    def from_config(cls, config: Mapping[str, Any]) -> DecayPolicy:
        return cls(
            enabled=config["MEMORY_TYPED_DECAY_ENABLED"],
            episodic_days=config["MEMORY_TYPED_DECAY_EPISODIC_DAYS"],
            access_immunity=config["MEMORY_TYPED_DECAY_ACCESS_IMMUNITY"],
        )

    def weight(self, memory: Memory, now: datetime) -> float:
        """The factor a memory's ranking score is multiplied by (1.0: no decay)."""
        if (
            not self.enabled
            or memory.type != DECAYING_TYPE
            or memory.access_count >= self.access_immunity
        ):
            return 1.0
        since = _parse(memory.last_accessed_at or memory.created_at)
        age_days = max(0.0, (now - since).total_seconds() / 86400)
        return 0.5 ** (age_days / self.episodic_days)

    def doomed(self, now: datetime) -> list[ColumnElement[bool]]:
        """SQL conditions on `memories` for the episodic memories decay deletes at `now`."""
        cutoff = to_iso(now - timedelta(days=self.episodic_days))
        return [
            memories.c.type == DECAYING_TYPE,
            memories.c.access_count < self.access_immunity,
            func.coalesce(memories.c.last_accessed_at, memories.c.created_at) < cutoff,
        ]


def _parse(iso: str) -> datetime:
    return datetime.fromisoformat(iso.replace("Z", "+00:00"))
