"""Preview a retrieval: what the gateway would inject for a query, and why."""

from __future__ import annotations

from typing import Any

from omniroute.memory.search.budget import within_shares
from omniroute.memory.search.retrieval import Retriever
from omniroute.memory.search.tokens import count_tokens
from omniroute.memory.settings import MAX_BUDGET_TOKENS, MemoryConfig


def preview_retrieval(
    retriever: Retriever,
    settings: MemoryConfig,
    *,
    api_key_id: str,
    query: str,
    strategy: str,
    max_tokens: int,
    limit: int,
    session_id: str | None = None,
    user_id: str = "",
) -> dict[str, Any]:
    """Rank the memories a chat of the key (and of its end user `user_id`) would see, as the
    gateway would, with each one's scores, its scope and the budget (global ones within
    their share).

    `settings` are the memory settings the gateway would use; `strategy` and `max_tokens`
    stand in for theirs. Changes nothing: no access is counted.
    """
    share = settings.global_budget_percent
    ranking = retriever.rank(
        api_key_id=api_key_id,
        query=query,
        settings=settings,
        strategy=strategy,
        session_id=session_id,
        user_id=user_id,
        include_global=share > 0,
    )
    relevant = ranking.relevant(retriever.options.relevance_floor)
    kept = {memory.id for memory in relevant}
    injected = {memory.id for memory in within_shares(relevant, max_tokens, share)}
    return {
        "memories": [
            {
                "id": item.memory.id,
                "type": item.memory.type,
                "key": item.memory.key,
                "content": item.memory.content,
                "scope": item.memory.scope,
                "userId": item.memory.user_id,
                "score": item.score,
                "tokens": count_tokens(item.memory.content),
                "tier": item.tier,
                "vecScore": item.vec_score,
                "ftsScore": item.fts_score,
                "decay": item.decay,
                "injected": item.memory.id in injected,
                "belowFloor": item.memory.id not in kept,
            }
            for item in ranking.items[:limit]
        ],
        "resolution": {
            "embeddingSource": ranking.embedding_source,
            "embeddingModel": ranking.embedding_model,
            "vectorStore": ranking.vector_store or retriever.vector_store,
            "strategyUsed": ranking.strategy_used,
            "fusion": retriever.options.fusion,
            "relevanceFloor": retriever.options.relevance_floor,
            "rerankApplied": ranking.rerank_applied,
            "rerankError": ranking.rerank_error,
            "fallbackReason": ranking.fallback_reason,
        },
        "totalTokensUsed": sum(
            count_tokens(item.memory.content)
            for item in ranking.items
            if item.memory.id in injected
        ),
        "budgetMaxTokens": min(max_tokens, MAX_BUDGET_TOKENS),
    }
