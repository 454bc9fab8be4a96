"""The engine's state in one report: keyword index, embedding, vector store, rerank."""

from __future__ import annotations

from typing import Any

from sqlalchemy.exc import SQLAlchemyError

from omniroute.memory.life.backfill import Backfill
from omniroute.memory.listing import count_live
from omniroute.memory.model import USER_SEPARATOR
from omniroute.memory.search.fts import keyword_search
from omniroute.memory.search.retrieval import Retriever
from omniroute.memory.settings import MemoryConfig

# The keyword index of each dialect, as reports name it.
KEYWORD_BACKENDS = {"sqlite": "FTS5", "postgresql": "tsvector"}


def engine_status(
    retriever: Retriever, backfill: Backfill, settings: MemoryConfig
) -> dict[str, Any]:
    """The report for the memory settings `settings`, from the engine's own parts."""
    resolution = retriever.sources.resolve(settings)
    embedder = resolution.embedder
    vectors = retriever.store.db.vectors
    with retriever.store.db.read() as conn:
        meta = retriever.index.meta(conn) if vectors.available else None
        rows = retriever.index.count(conn) if vectors.available else 0
    return {
        "keyword": keyword_tier(retriever),
        "embedding": {
            "source": embedder.source if embedder else None,
            "model": embedder.model if embedder else None,
            "dimensions": embedder.dim if embedder else None,
            "available": embedder is not None,
            "reason": resolution.reason,
            "cacheStats": embedder.stats() if embedder else None,
            "staticModel": retriever.sources.static_state(),
            "multilingualModel": retriever.sources.multilingual_state(),
        },
        "vectorStore": {
            "backend": vectors.backend,
            "available": vectors.available,
            "version": vectors.version,
            "reason": vectors.error,
            "quantization": retriever.index.quantization,
            "signature": meta.signature if meta else None,
            "dimensions": meta.active_dim if meta else None,
            "lastResetAt": meta.last_reset_at if meta else None,
            "rowCount": rows,
            "memoryCount": count_live(retriever.store),
            "needsReindex": backfill.pending(),
            "backfill": backfill.progress.as_dict(),
        },
        "rerank": retriever.reranker.status(settings),
    }


def keyword_tier(retriever: Retriever) -> dict[str, Any]:
    """The keyword index, probed with a search of a partition no memory has (a lone
    separator: model.owner_of never makes it): a missing or broken FTS5 table or tsvector
    column says so here, with the store's words."""
    store = retriever.store
    backend = KEYWORD_BACKENDS[store.db.dialect]
    try:
        with store.db.read() as conn:
            keyword_search(
                conn, owners=(USER_SEPARATOR,), query="probe", now_iso=store.now(), limit=1
            )
    except SQLAlchemyError as exc:
        return {"available": False, "backend": backend, "reason": str(exc.orig or exc)}
    return {"available": True, "backend": backend, "reason": None}
