"""How a retrieval scores: the process's options, a ranked memory, and the fusion of the
keyword and vector sides (a min-max normalised blend, or reciprocal rank fusion)."""

from __future__ import annotations

from dataclasses import dataclass, field

from omniroute.memory.life.decay import DecayPolicy
from omniroute.memory.model import Memory

FUSIONS = ("blend", "rrf")
# Chosen on the LoCoMo development split (bench/retrieval_quality.py; docs/retrieval.md has the
# table): the keyword side's share of a blend score (0.5 before stemming; 0.7 is best for
# both local sources now), and the floor that injects as much evidence as a top-10 cut would,
# with the fewest memories (about 10 of the 50 the budget would hold).
BLEND_KEYWORD_WEIGHT = 0.7
RELEVANCE_FLOOR = 0.4


@dataclass(frozen=True)
class RetrievalOptions:
    """How the engine retrieves, fixed for the life of the process (MEMORY_* env settings)."""

    top_k: int = 100
    fusion: str = "blend"
    rrf_k: int = 60
    blend_weight: float = BLEND_KEYWORD_WEIGHT  # the keyword side's share of a blend score
    # What share of the best score a memory needs to be injected (0: all that fit).
    relevance_floor: float = RELEVANCE_FLOOR
    decay: DecayPolicy = field(default_factory=DecayPolicy)


@dataclass
class Ranked:
    memory: Memory
    score: float
    tier: str  # recent, keyword, vector or hybrid
    vec_score: float | None = None
    fts_score: float | None = None
    decay: float = 1.0  # the typed-decay factor `score` includes (decay.py)


def fuse(
    keyword: list[tuple[Memory, float]],
    vector: list[tuple[Memory, float]],
    options: RetrievalOptions,
) -> list[Ranked]:
    """Merge both lists by min-max normalised score blend, or by reciprocal rank fusion."""
    merged: dict[str, Ranked] = {}
    for memory, score in keyword:
        merged[memory.id] = Ranked(memory, 0.0, "keyword", fts_score=score)
    for memory, similarity in vector:
        item = merged.setdefault(memory.id, Ranked(memory, 0.0, "vector"))
        item.vec_score = similarity
        if item.fts_score is not None:
            item.tier = "hybrid"
    if options.fusion == "rrf":
        for ranked_list in (keyword, vector):
            for rank, (memory, _) in enumerate(ranked_list, start=1):
                merged[memory.id].score += 1 / (options.rrf_k + rank)
    else:
        keyword_norm = _min_max(dict((m.id, s) for m, s in keyword))
        vector_norm = _min_max(dict((m.id, s) for m, s in vector))
        weight = options.blend_weight
        for memory_id, item in merged.items():
            keyword_part = keyword_norm.get(memory_id, 0.0)
            item.score = weight * keyword_part + (1 - weight) * vector_norm.get(memory_id, 0.0)
    return sorted(merged.values(), key=lambda item: item.score, reverse=True)


def _min_max(scores: dict[str, float]) -> dict[str, float]:
    if not scores:
        return {}
    low, high = min(scores.values()), max(scores.values())
    if high == low:
        return dict.fromkeys(scores, 1.0)
    return {key: (value - low) / (high - low) for key, value in scores.items()}
