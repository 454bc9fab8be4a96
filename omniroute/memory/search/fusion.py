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
# A source whose vectors find more alone gets a blend of its own, chosen the same way on the
# development halves of LoCoMo and of the Dutch and German set (bench/multilingual_quality.py):
# the multilingual source at 0.5 (0.7: LoCoMo R@10 0.656, nl/de hit@3 0.750; 0.5: 0.662, 0.783).
SOURCE_KEYWORD_WEIGHTS = {"multilingual": 0.5}
RELEVANCE_FLOOR = 0.4


@dataclass(frozen=True)
class RetrievalOptions:
    """How the engine retrieves, fixed for the life of the process (MEMORY_* env settings)."""

    top_k: int = 100
    fusion: str = "blend"
    rrf_k: int = 60
    # The keyword side's share of a blend score (None: the vectors' source's own).
    blend_weight: float | None = None
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


def keyword_weight(options: RetrievalOptions, source: str | None) -> float:
    """The keyword side's share of a blend score for vectors of `source`."""
    if options.blend_weight is not None:
        return options.blend_weight
    return SOURCE_KEYWORD_WEIGHTS.get(source or "", BLEND_KEYWORD_WEIGHT)


def fuse(
    keyword: list[tuple[Memory, float]],
    vector: list[tuple[Memory, float]],
    options: RetrievalOptions,
    source: str | None = None,
) -> list[Ranked]:
    """Merge both lists by min-max normalised score blend, or by reciprocal rank fusion;
    `source` made the vectors (it may have a blend of its own)."""
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
        weight = keyword_weight(options, source)
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
