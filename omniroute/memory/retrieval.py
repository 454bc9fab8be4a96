"""Which memories to inject for a request: the one retrieval function the proxy calls.

Strategies: `recent` takes the owner's newest memories; `semantic` and `hybrid` take the
memories that match the query's topic words (FTS5, bm25) until the vector engine lands
behind this same function. A query with nothing relevant finds nothing, so nothing is
injected (the reference always filled the budget with recent memories: noise that costs
tokens). Expiry and retention hold on every path.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from ..clock import to_iso
from .fts import keyword_search
from .model import Memory, MemoryFilter, estimate_tokens
from .store import MemoryStore

MAX_BUDGET_TOKENS = 8000
CANDIDATES = 100


@dataclass(frozen=True)
class RetrievalConfig:
    strategy: str = "hybrid"
    max_tokens: int = 2000
    retention_days: int = 30

    @classmethod
    def from_settings(cls, settings: Mapping[str, Any]) -> RetrievalConfig:
        return cls(settings["strategy"], settings["maxTokens"], settings["retentionDays"])


def retrieve(
    store: MemoryStore, *, api_key_id: str, query: str, config: RetrievalConfig
) -> list[Memory]:
    """Return the memories to inject, best first, within the token budget."""
    if config.max_tokens <= 0:
        return []
    cutoff = to_iso(store.clock() - timedelta(days=config.retention_days))
    if config.strategy == "recent":
        candidates = store.find(
            MemoryFilter(api_key_id=api_key_id, created_after=cutoff), limit=CANDIDATES
        )
    elif query.strip():
        with store.db.read() as conn:
            hits = keyword_search(
                conn,
                api_key_id=api_key_id,
                query=query,
                now_iso=store.now(),
                created_after=cutoff,
                limit=CANDIDATES,
            )
        candidates = [memory for memory, _ in hits]
    else:
        candidates = []
    return within_budget(candidates, min(config.max_tokens, MAX_BUDGET_TOKENS))


def within_budget(memories: list[Memory], budget: int) -> list[Memory]:
    """Take memories in order while their tokens fit the budget (REFERENCE section 4.6).

    The first memory that does not fit ends the walk, except that a first memory is taken
    even when it alone is over the budget.
    """
    taken: list[Memory] = []
    used = 0
    for memory in memories:
        cost = estimate_tokens(memory.content)
        if used + cost > budget:
            if not taken:
                taken.append(memory)
            break
        taken.append(memory)
        used += cost
    return taken
