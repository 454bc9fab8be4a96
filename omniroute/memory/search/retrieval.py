"""Which memories to inject for a request: the one retrieval engine the proxy calls.

Strategies:
- `recent`: the owner's newest memories.
- `keyword`: BM25 matches of the query's topic words' stems (also every fallback): FTS5 or
  tsvector, or for a large key its Tantivy index in RAM (keyword_cache.py).
- `semantic`: the owner's nearest vectors (sqlite-vec, KNN inside the tenant), above a
  similarity floor.
- `hybrid`: keyword matches (FTS5 bm25) and nearest vectors fused, by a min-max normalised
  score blend (`blend`, the default: it beat RRF on the LoCoMo development split) or by
  reciprocal rank fusion (`rrf`, the reference's).
The vector side comes from Qdrant when it is selected, healthy and caught up (qdrant/tier.py),
else from the local index. Without vectors (sqlite-vec missing, no embedding source, an
embedding error, the index still holding another model's vectors) semantic and hybrid fall
back to keyword search, and the result says why (every fallback's reason, in order). A
query with nothing relevant finds nothing, so nothing is injected.
Expiry, retention and session scope hold on every tier, vectors included.

One retrieval searches the partitions its request may see (`Reach`): the key's shared
memories, the end user's own when one is named, and the global memories when asked; each
partition is an owner of every index, so a user among a key's thousands searches only
their own. Their keyword matches and their vector matches are each merged before fusion.
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import timedelta
from functools import cache
from typing import TYPE_CHECKING

from sqlalchemy import BigInteger, Text, any_, bindparam, select
from sqlalchemy.dialects import postgresql

from omniroute.core.clock import to_iso
from omniroute.core.db.tables import memories
from omniroute.memory.conditions import search_conditions
from omniroute.memory.embedding.base import EmbeddingError, signature
from omniroute.memory.embedding.sources import EmbeddingSources
from omniroute.memory.model import MEMORY_COLUMNS, Memory
from omniroute.memory.qdrant.connection import QdrantUnavailable
from omniroute.memory.search.fts import POOL_FACTOR, keyword_search
from omniroute.memory.search.fusion import Ranked, RetrievalOptions, fuse
from omniroute.memory.search.keyword_cache import KeywordCache
from omniroute.memory.search.query_words import topic_words
from omniroute.memory.search.reach import Reach
from omniroute.memory.search.recent import newest
from omniroute.memory.search.rerank import MAX_DOCUMENTS as MAX_RERANKED
from omniroute.memory.search.rerank import Reranker, RerankFailed
from omniroute.memory.search.stemming import query_stems
from omniroute.memory.search.vectors import VectorIndex
from omniroute.memory.settings import MemoryConfig
from omniroute.memory.store import MemoryStore

if TYPE_CHECKING:  # the tier reads the memory settings, which read this module's strategies
    from omniroute.memory.qdrant.tier import QdrantTier

# The strategies a retrieval may use; chat requests (the strategy setting) take all but the
# bare keyword search, as the reference does; a preview may ask for any.
STRATEGIES = ("keyword", "semantic", "hybrid", "recent")
CANDIDATES = 100
# Cosine similarity below which a vector match counts as unrelated (all-MiniLM-L6-v2 and
# its distilled static model put unrelated short texts well below it).
SIMILARITY_FLOOR = 0.25


@dataclass(frozen=True)
class RetrievalConfig:
    """One retrieval: the process's options with the memory settings of the moment."""

    strategy: str
    retention_days: int
    options: RetrievalOptions


@dataclass
class Ranking:
    items: list[Ranked] = field(default_factory=list)
    strategy_used: str = "recent"
    embedding_source: str | None = None
    embedding_model: str | None = None
    fallback_reason: str | None = None
    rerank_applied: bool = False
    rerank_error: str | None = None
    vector_store: str | None = None  # where the vector side came from, if it did

    def relevant(self, floor: float) -> list[Memory]:
        """The memories, best first, that score at least `floor` times the best score: the
        few a question is about, not every memory that shares a word with it. A ranking
        without positive scores (recent, a reranker's logits) keeps them all."""
        best = self.items[0].score if self.items else 0.0
        if floor <= 0 or best <= 0:
            return [item.memory for item in self.items]
        return [item.memory for item in self.items if item.score >= floor * best]

    def fall_back(self, reason: str) -> None:
        """Record why a tier was passed over (each reason kept, in order)."""
        self.fallback_reason = (
            f"{self.fallback_reason}; {reason}" if self.fallback_reason else reason
        )


class Retriever:
    strategies = STRATEGIES

    def __init__(
        self,
        store: MemoryStore,
        index: VectorIndex,
        sources: EmbeddingSources | None,
        reranker: Reranker | None = None,
        options: RetrievalOptions | None = None,
        qdrant: QdrantTier | None = None,
        keywords: KeywordCache | None = None,
    ) -> None:
        """`keywords` holds large keys' keyword indexes (None: the store answers every key)."""
        self.store = store
        self.index = index
        self.keywords = keywords
        self.sources = sources
        self.reranker = reranker
        self.options = options or RetrievalOptions()
        self.qdrant = qdrant
        self._pool = ThreadPoolExecutor(max_workers=4, thread_name_prefix="omniroute-search")

    @property
    def vector_store(self) -> str:
        """Where the vectors live, as reports name it."""
        vectors = self.store.db.vectors
        return vectors.backend if vectors.available else "none"

    def close(self) -> None:
        self._pool.shutdown(wait=True)

    def rank(
        self,
        *,
        api_key_id: str,
        query: str,
        settings: MemoryConfig,
        strategy: str | None = None,
        session_id: str | None = None,
        user_id: str = "",
        include_global: bool = False,
    ) -> Ranking:
        """Every candidate, scored and ordered best first (no budget applied).

        `settings` are the memory settings; `strategy` overrides theirs (the preview's).
        The key's shared memories are searched, with `user_id`'s own when given and the
        global memories when `include_global`; a `session_id` keeps that session's (and
        those of no session).
        """
        config = RetrievalConfig(
            strategy=strategy or settings.strategy,
            retention_days=settings.retention_days,
            options=self.options,
        )
        reach = Reach.of(
            api_key_id,
            user_id=user_id,
            include_global=include_global,
            session_id=session_id,
            created_after=to_iso(self.store.clock() - timedelta(days=config.retention_days)),
        )
        ranking = self._candidates(reach, query, config, settings)
        model = self.reranker.model_for(settings) if self.reranker else None
        if model and ranking.items and query.strip():
            self._rerank(ranking, model, query)
        if self.options.decay.enabled and ranking.strategy_used != "recent":
            self._decay(ranking)
        return ranking

    def _decay(self, ranking: Ranking) -> None:
        """Typed decay's factor on each score, then the order again (stable among equals)."""
        now = self.store.clock()
        for item in ranking.items:
            item.decay = self.options.decay.weight(item.memory, now)
            item.score *= item.decay
        ranking.items.sort(key=lambda item: item.score, reverse=True)

    def _rerank(self, ranking: Ranking, model: str, query: str) -> None:
        head, tail = ranking.items[:MAX_RERANKED], ranking.items[MAX_RERANKED:]
        try:
            order = self.reranker.rerank(model, query, [i.memory.content for i in head])
        except RerankFailed as exc:
            ranking.rerank_error = str(exc)
            return
        placed = {index for index, _ in order}
        reordered = []
        for index, score in order:
            head[index].score = score
            reordered.append(head[index])
        reordered += [item for index, item in enumerate(head) if index not in placed]
        ranking.items = reordered + tail
        ranking.rerank_applied = True

    def _candidates(
        self, live: Reach, query: str, config: RetrievalConfig, settings: MemoryConfig
    ) -> Ranking:
        if config.strategy == "recent":
            found = self._recent(live)
            return Ranking([Ranked(m, 0.0, "recent") for m in found], "recent")
        if not query.strip():
            return Ranking(strategy_used=config.strategy, fallback_reason="no query text")
        ranking = Ranking(strategy_used=config.strategy)
        qdrant_first = (
            config.strategy != "keyword"
            and self.qdrant is not None
            and self.qdrant.selected(settings)
        )
        embedder = None
        if config.strategy != "keyword" and not qdrant_first:
            embedder = self._embedder(settings, ranking)
        if embedder is None and not qdrant_first:  # keyword search alone: no thread
            keyword = self._keyword(live, query)
            ranking.strategy_used = "keyword"
            ranking.items = [Ranked(m, score, "keyword", fts_score=score) for m, score in keyword]
            return ranking
        # Hybrid runs the keyword search beside the vector search: SQLite lets go of the GIL
        # while it works, so on two cores the slower of the two sets the time, not their sum.
        keyword_job = None
        if config.strategy == "hybrid":
            keyword_job = self._pool.submit(self._keyword, live, query)
        vector = self._from_qdrant(live, query, config, settings, ranking) if qdrant_first else None
        if vector is None and qdrant_first:
            embedder = self._embedder(settings, ranking)
        if vector is None and embedder is not None:
            vector = self._vector(embedder, live, query, config, ranking)
        if vector is not None and config.strategy == "semantic":
            ranking.items = [Ranked(m, sim, "vector", vec_score=sim) for m, sim in vector]
            return ranking
        keyword = keyword_job.result() if keyword_job else self._keyword(live, query)
        if vector is None:
            ranking.strategy_used = "keyword"
            ranking.items = [Ranked(m, score, "keyword", fts_score=score) for m, score in keyword]
        else:
            ranking.items = fuse(keyword, vector, config.options, ranking.embedding_source)
        return ranking

    def _recent(self, live: Reach) -> list[Memory]:
        """The newest memories the reach sees."""
        with self.store.db.read() as conn:
            return newest(conn, live, self.store.now(), CANDIDATES)

    def _keyword(self, live: Reach, query: str) -> list[tuple[Memory, float]]:
        """The partitions' best keyword matches: a large key's from its indexed copy when
        the search's conditions leave enough of them, the rest from one store search over
        all of them (FTS5 or tsvector), so that their scores are one ranking's."""
        pool = POOL_FACTOR * CANDIDATES
        copied: dict[str, list[tuple[int, float]]] = {}
        if self.keywords is not None:
            stems = query_stems(topic_words(query))
            for owner in live.owners:
                hits = self.keywords.search(owner, stems, pool, live.session_id)
                if hits is not None:
                    copied[owner] = hits
        found: list[tuple[Memory, float]] = []
        with self.store.db.read() as conn:
            for owner, hits in list(copied.items()):
                held = self._from_copy(conn, hits, live, pool)
                if held is None:
                    del copied[owner]
                else:
                    found += held
            rest = tuple(owner for owner in live.owners if owner not in copied)
            if rest:
                found += keyword_search(
                    conn,
                    owners=rest,
                    query=query,
                    now_iso=self.store.now(),
                    session_id=live.session_id,
                    created_after=live.created_after,
                    limit=CANDIDATES,
                )
        if copied and rest or len(copied) > 1:
            found = sorted(found, key=lambda pair: pair[1], reverse=True)[:CANDIDATES]
        return found

    def _from_copy(
        self, conn, hits: list[tuple[int, float]], live: Reach, pool: int
    ) -> list[tuple[Memory, float]] | None:
        """The live memories of a copy's hits, best first; None when the conditions left
        too few and the copy had more (the store then searches that key too)."""
        found: list[tuple[Memory, float]] = []
        for start in range(0, len(hits), CANDIDATES):  # the best first: most need one
            found += self._rows(conn, "seq", hits[start : start + CANDIDATES], live)
            if len(found) >= CANDIDATES:
                return found[:CANDIDATES]
        return found if len(hits) < pool else None  # fewer: nothing else matches

    def _embedder(self, settings: MemoryConfig, ranking: Ranking):
        """The embedder of the settings, or None (with the reason); whether the index holds
        its vectors is asked by the vector search, in its own transaction."""
        if not self.store.db.vectors.available:
            ranking.fall_back(_unavailable(self.store.db.vectors))
            return None
        if self.sources is None:
            ranking.fall_back("no embedding sources")
            return None
        resolution = self.sources.resolve(settings)
        embedder = resolution.embedder
        if embedder is None:
            ranking.fall_back(f"no embedding source: {resolution.reason}")
            return None
        ranking.embedding_source, ranking.embedding_model = embedder.source, embedder.model
        return embedder

    def _vector(
        self,
        embedder,
        live: Reach,
        query: str,
        config: RetrievalConfig,
        ranking: Ranking,
    ) -> list[tuple[Memory, float]] | None:
        """Nearest live memories above the floor, or None (with the reason) on an error."""
        try:
            query_vector = embedder.embed([query], query=True)[0]
        except EmbeddingError as exc:
            ranking.fall_back(f"embedding failed ({exc.kind}): {exc}")
            return None
        ranking.vector_store = self.vector_store
        with self.store.db.read() as conn:  # one transaction: each is a round trip or three
            indexed = self.index.meta(conn).signature
            if indexed != signature(embedder, self.index.quantization):
                ranking.fall_back("the vector index is being rebuilt for the current model")
                self.store.notify_write()
                return None
            hits = [
                hit
                for owner in live.owners
                for hit in self.index.search(
                    conn, owner, query_vector, config.options.top_k, indexed
                )
            ]
            return self._rows(conn, "seq", hits, live, SIMILARITY_FLOOR)

    def _from_qdrant(
        self,
        live: Reach,
        query: str,
        config: RetrievalConfig,
        settings: MemoryConfig,
        ranking: Ranking,
    ) -> list[tuple[Memory, float]] | None:
        """Qdrant's nearest live memories above the floor, or None (with the reason)."""
        try:
            hits, embedder = self.qdrant.nearest(settings, live, query, config.options.top_k)
        except QdrantUnavailable as exc:
            ranking.fall_back(f"qdrant: {exc}")
            return None
        ranking.vector_store = "qdrant"
        ranking.embedding_source, ranking.embedding_model = embedder.source, embedder.model
        with self.store.db.read() as conn:
            return self._rows(conn, "id", hits, live, SIMILARITY_FLOOR)

    def _rows(self, conn, name: str, hits, live: Reach, floor: float = 0.0):
        """The live memories of `hits` ((column value, score)) at or above `floor`, best first
        (the SQL conditions hold again: a copy in RAM or Qdrant may lag its memory)."""
        similar = {value: sim for value, sim in hits if sim >= floor}
        if not similar:
            return []
        statement = _hits_statement(
            conn.dialect.name, name, live.session_id is not None, live.created_after is not None
        )
        bound = {"hits": list(similar), **live.binds(self.store.now())}
        rows = conn.execute(statement, bound)
        found = [(Memory.from_values(row[1:]), similar[row[0]]) for row in rows]
        return sorted(found, key=lambda pair: pair[1], reverse=True)


@cache
def _hits_statement(dialect: str, name: str, by_session: bool, by_age: bool):
    """The live memories among the hits (values of column `name`, bound as `hits`), under the
    search's conditions. The hits come first, by their key, then the conditions on those few:
    given both at once, SQLite's planner walked the owner's index instead (docs/benchmarks.md
    has the cost). Made once per shape: made anew for each search (a ClauseAdapter over the
    conditions) it took 1.5 ms of a PostgreSQL search. Only a Memory's columns are read (not
    the stems, as long as the text). PostgreSQL gets the hits as one array,
    so the statement's text is the same for any number of hits and psycopg prepares it."""
    column = memories.c[name]
    if dialect == "postgresql":
        element = BigInteger() if name == "seq" else Text()
        among = column == any_(bindparam("hits", type_=postgresql.ARRAY(element)))
    else:
        among = column.in_(bindparam("hits", expanding=True))
    columns = [memories.c.seq, memories.c.owner, *(memories.c[name] for name in MEMORY_COLUMNS)]
    hit = select(*columns).where(among).cte("hit").prefix_with("MATERIALIZED")
    wanted = [hit.c[name], *(hit.c[name] for name in MEMORY_COLUMNS)]  # the hit's key first
    return select(*wanted).where(search_conditions(hit, by_session, by_age))


def _unavailable(vectors) -> str:
    return f"{vectors.backend} is not available: {vectors.error}"
