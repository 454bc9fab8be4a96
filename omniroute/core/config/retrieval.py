"""The environment settings of how retrieval ranks (config.py adds them to its registry):
fixed for the life of a process, chosen on the LoCoMo development split (bench/)."""

from __future__ import annotations

from omniroute.core.config.values import Setting, choice, fraction, optional_fraction, positive_int

RETRIEVAL_SETTINGS: tuple[Setting, ...] = (
    Setting(
        "MEMORY_VEC_TOP_K",
        100,
        "Nearest neighbours a vector search takes before fusion (the reference's 20 lost recall "
        "on the LoCoMo development split).",
        positive_int,
    ),
    Setting(
        "MEMORY_FUSION",
        "blend",
        "How hybrid retrieval merges keyword and vector results: `blend` (min-max normalised "
        "scores, weighted by MEMORY_BLEND_KEYWORD_WEIGHT) or `rrf` (reciprocal rank fusion, as "
        "the reference does).",
        choice("blend", "rrf"),
    ),
    Setting(
        "MEMORY_RRF_K",
        60,
        "The k constant of reciprocal rank fusion (when fusion is `rrf`).",
        positive_int,
    ),
    Setting(
        "MEMORY_VEC_CACHE_MIN_VECTORS",
        5_000,
        "On either store, a key with at least this many memories is searched from a matrix in "
        "the searching process's RAM (exact, and several times faster than sqlite-vec's or "
        "pgvector's scan), "
        "built in the background and caught up from every process's writes.",
        positive_int,
    ),
    Setting(
        "MEMORY_VEC_GRAPH_MIN_VECTORS",
        20_000,
        "On either store, a key with at least this many vectors is searched from an HNSW graph "
        "(approximate: recall@10 0.97 or more against the exact scan) instead of the exact "
        "matrix; the graph is saved under DATA_DIR/vector_graphs, so a restart loads it.",
        positive_int,
    ),
    Setting(
        "MEMORY_VEC_CACHE_MB",
        1024,
        "The most RAM those matrices and graphs take in one process (a 10k-memory key of "
        "256-dimension vectors takes 10 MB as a matrix, a 1M one about 850 MB as a graph); a "
        "key past it stays with the store's exact scan.",
        positive_int,
    ),
    Setting(
        "MEMORY_KEYWORD_INDEX_MIN_MEMORIES",
        10_000,
        "On either store, a key with at least this many memories gets its keyword search from "
        "a Tantivy index in the searching process's RAM (BM25 over the same stems, without "
        "scoring every match), built in the background and caught up from every process's "
        "writes within about half a second.",
        positive_int,
    ),
    Setting(
        "MEMORY_KEYWORD_INDEX_MB",
        512,
        "The most RAM those keyword indexes take in one process (about 130 MB for a key of "
        "1M memories); a key past it keeps the store's own keyword search.",
        positive_int,
    ),
    Setting(
        "MEMORY_BLEND_KEYWORD_WEIGHT",
        None,
        "The keyword side's share of a hybrid `blend` score (the vector side has the rest); "
        "unset, the embedding source's own: 0.7, and 0.5 for the multilingual source.",
        optional_fraction,
        default_doc="the source's own",
    ),
    Setting(
        "MEMORY_RELEVANCE_FLOOR",
        0.4,
        "A memory is injected only when its score is at least this share of the best one's "
        "(0 injects what the budget holds).",
        fraction,
    ),
)
