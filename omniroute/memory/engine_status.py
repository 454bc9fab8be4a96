"""The engine's state in one report: keyword index, embedding, vector store, rerank."""

from __future__ import annotations

from typing import Any

from .embedding.static_model import build_state
from .listing import count_live


def engine_status(svc) -> dict[str, Any]:
    settings = svc.memory_settings.get()
    resolution = svc.embeddings.resolve(settings)
    embedder = resolution.embedder
    with svc.db.read() as conn:
        meta = svc.vectors.meta(conn) if svc.db.vectors.available else None
        rows = svc.vectors.count(conn) if svc.db.vectors.available else 0
    return {
        "keyword": {"available": True, "backend": "FTS5"},
        "embedding": {
            "source": embedder.source if embedder else None,
            "model": embedder.model if embedder else None,
            "dimensions": embedder.dim if embedder else None,
            "available": embedder is not None,
            "reason": resolution.reason,
            "cacheStats": embedder.stats() if embedder else None,
            "staticModel": build_state(svc.embeddings.static_path()),
        },
        "vectorStore": {
            "backend": "sqlite-vec",
            "available": svc.db.vectors.available,
            "version": svc.db.vectors.version,
            "reason": svc.db.vectors.error,
            "quantization": svc.vectors.quantization,
            "signature": meta.signature if meta else None,
            "dimensions": meta.active_dim if meta else None,
            "lastResetAt": meta.last_reset_at if meta else None,
            "rowCount": rows,
            "memoryCount": count_live(svc.memories),
            "needsReindex": svc.backfill.pending(),
            "backfill": svc.backfill.progress.as_dict(),
        },
        "rerank": rerank_status(svc, settings),
    }


def rerank_status(svc, settings) -> dict[str, Any]:
    model = settings["rerankProviderModel"]
    provider = svc.providers.get(model.partition("/")[0]) if model else None
    reason = None
    if not settings["rerankEnabled"]:
        reason = "rerankEnabled is false"
    elif not model:
        reason = "no rerankProviderModel is set"
    elif provider is None:
        reason = f"no provider for {model!r}"
    return {
        "enabled": settings["rerankEnabled"],
        "model": model,
        "provider": provider.id if provider else None,
        "available": reason is None,
        "reason": reason,
    }
