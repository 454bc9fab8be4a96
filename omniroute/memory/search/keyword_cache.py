"""Large keys' keyword search from a Tantivy index in RAM: BM25 without scoring every match.

FTS5's bm25() and PostgreSQL's ts_rank score every memory that holds one of a question's
stems before they rank them; in a key of 100k memories a speaker's name or a common word
is held by tens of thousands (FTS5: p50 34 ms at 100k; Tantivy, Lucene's design with
block-max WAND, 1.3 ms: bench/keyword_candidates.py, docs/benchmarks.md). So a process keeps
a Tantivy index of each key of at least `min_memories` memories it searches, of the same
Snowball stems (`memories.search_stems`) the stores search.

The database stays the truth: an index is built from it in the background the first time
the key is searched (the store's own search answers meanwhile), and a committer thread
catches every index up from `memory_changes` (change_log.py) and commits it each
COMMIT_SECONDS, so a search never waits for a write: what changed in the last moment may be
missing from a large key's keyword hits, and the hits' rows are read again under the
search's conditions (a deleted or expired memory is never returned). An index the log no
longer reaches is built again; the process's indexes together stay under `max_bytes`
(estimated), past which a key stays with the store's search.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from contextlib import AbstractContextManager

import tantivy
from sqlalchemy import Connection, func, select

from omniroute.core.db.tables import memories
from omniroute.memory.search.change_log import ChangeLog
from omniroute.memory.search.key_copies import KeyCopies

log = logging.getLogger(__name__)

COMMIT_SECONDS = 0.5  # how stale a large key's keyword hits may be
KEPT = 0.8  # an index is kept down to this share of min_memories (no rebuilds at the edge)
READ_PART = 50_000  # memories read in one transaction while a key is built
BYTES_A_MEMORY = 160  # a RAM index's size per memory, about (134 measured at 1M)
WRITER_HEAP = 15_000_000  # Tantivy's smallest indexing budget for one thread


def _schema() -> tantivy.Schema:
    builder = tantivy.SchemaBuilder()
    # The stems are already lower-cased and folded: split on white space, nothing more.
    builder.add_text_field("stems", tokenizer_name="whitespace", index_option="freq")
    builder.add_integer_field("seq", stored=True, indexed=True)
    builder.add_text_field("session", tokenizer_name="raw", index_option="basic")
    return builder.build()


SCHEMA = _schema()


def _session_term(session: str | None) -> str:
    """A session as its one raw term (prefixed: no session is a term too)."""
    return f"s:{session or ''}"


class TenantKeywords:
    """One key's memories in a Tantivy index in RAM, by memory seq."""

    def __init__(self, owner: str, position: object) -> None:
        self.owner, self.position = owner, position
        self.lock = threading.Lock()
        self.dirty = False
        # Which seqs the index holds, a bit each (1.25 MB for seqs up to 10M): the change log
        # names every key's changes, and a delete queued for each of another key's would
        # have made every index commit whenever any key was written.
        self._held = bytearray()
        self._index = tantivy.Index(SCHEMA)
        self._writer = self._index.writer(heap_size=WRITER_HEAP, num_threads=1)
        self._searcher = self._index.searcher()

    def __len__(self) -> int:
        return self._searcher.num_docs

    @property
    def nbytes(self) -> int:
        return len(self) * BYTES_A_MEMORY

    def put(self, seq: int, stems: str, session: str | None) -> None:
        """Index a memory in place of what the index held of it."""
        self.drop(seq)
        self.add(seq, stems, session)

    def add(self, seq: int, stems: str, session: str | None) -> None:
        """Index a memory the index does not hold (a build: a delete queued for each of a
        million memories took a gigabyte until the commit)."""
        document = tantivy.Document()
        document.add_integer("seq", seq)
        document.add_text("stems", stems)
        document.add_text("session", _session_term(session))
        self._writer.add_document(document)
        self._mark(seq, True)
        self.dirty = True

    def drop(self, seq: int) -> None:
        if self._holds(seq):
            self._writer.delete_documents_by_term("seq", seq)
            self._mark(seq, False)
            self.dirty = True

    def _holds(self, seq: int) -> bool:
        byte = seq >> 3
        return byte < len(self._held) and bool(self._held[byte] & (1 << (seq & 7)))

    def _mark(self, seq: int, held: bool) -> None:
        byte = seq >> 3
        if byte >= len(self._held):
            self._held.extend(bytes(byte + 1 - len(self._held) + len(self._held) // 2))
        if held:
            self._held[byte] |= 1 << (seq & 7)
        else:
            self._held[byte] &= ~(1 << (seq & 7)) & 0xFF

    def commit(self) -> None:
        self._writer.commit()
        self._index.reload()
        self._searcher = self._index.searcher()
        self.dirty = False

    def search(
        self, stems: list[str], limit: int, session: str | None = None
    ) -> list[tuple[int, float]]:
        """The best `limit` memories holding any of the stems (of one session and of none,
        if a session is given)."""
        if not stems:
            return []
        query = tantivy.Query.boolean_query(
            [(tantivy.Occur.Should, tantivy.Query.term_query(SCHEMA, "stems", s)) for s in stems]
        )
        if session is not None:  # the session's term adds the same to every score
            sessions = tantivy.Query.boolean_query(
                [
                    (tantivy.Occur.Should, tantivy.Query.term_query(SCHEMA, "session", term))
                    for term in {_session_term(session), _session_term("")}
                ]
            )
            query = tantivy.Query.boolean_query(
                [(tantivy.Occur.Must, sessions), (tantivy.Occur.Must, query)]
            )
        searcher = self._searcher
        hits = searcher.search(query, limit, count=False).hits  # no count: no full scoring
        return [(searcher.doc(address)["seq"][0], score) for score, address in hits]


class KeywordCache(KeyCopies[TenantKeywords]):
    """The keyword indexes of one process's large keys, and their upkeep."""

    what = "keyword index"

    def __init__(
        self,
        read: Callable[[], AbstractContextManager[Connection]],
        changes: ChangeLog,
        *,
        min_memories: int,
        max_bytes: int,
    ) -> None:
        """`read` opens a read transaction (Database.read); `changes` is the store's log."""
        super().__init__(max_bytes, "omniroute-keywords")
        self._read = read
        self._changes = changes
        self.min_memories = min_memories
        self._stop = threading.Event()
        self._catching = threading.Lock()
        self._committer = threading.Thread(
            target=self._keep_up, name="omniroute-keywords-commit", daemon=True
        )
        self._committer.start()

    def search(
        self, owner: str, stems: list[str], limit: int, session: str | None = None
    ) -> list[tuple[int, float]] | None:
        """The owner's `limit` best matches (in one session, if given) as (seq, BM25 score),
        or None: not a large key, or not built yet (the caller asks the store)."""
        held = self._held.get(owner)
        if held is None:
            self._consider(owner)
            return None
        return held.search(stems, limit, session)

    def _read_key(self, owner: str) -> TenantKeywords | None:
        """The key's index, committed; None for a key too small or past the RAM bound. Read
        in parts, each in a transaction of its own, after the log's position: what changes
        meanwhile is applied again by the catch-up."""
        with self._read() as conn:
            size = conn.execute(select(func.count()).where(memories.c.owner == owner)).scalar_one()
            if size < self.min_memories or not self._fits(size * BYTES_A_MEMORY, owner):
                return None
            held = TenantKeywords(owner, self._changes.position(conn))
        last = 0
        while True:
            with self._read() as conn:
                rows = conn.execute(
                    select(memories.c.seq, memories.c.search_stems, memories.c.session_id)
                    .where(memories.c.owner == owner, memories.c.seq > last)
                    .order_by(memories.c.seq)
                    .limit(READ_PART)
                ).all()
            for seq, stems, session in rows:
                held.add(seq, stems, session)
            if len(rows) < READ_PART:
                break
            last = rows[-1][0]
        with self._read() as conn:
            found = self._changes.since(conn, held.position)
            if found is None:  # more changes while it was read than the log keeps
                return self._read_key(owner)
            self._catch_up(conn, held, found)
        held.commit()
        return held

    def _keep_up(self) -> None:
        """Catch every index up and commit it, each COMMIT_SECONDS, until closed."""
        while not self._stop.wait(COMMIT_SECONDS):
            try:
                self.catch_up()
            except Exception:  # the database may be away for a moment: the next tick tries
                log.exception("keyword indexes not caught up")

    def catch_up(self) -> None:
        """Apply every index's changes since its position, and commit those that changed
        (one catch-up at a time: the committer's, or a caller's)."""
        with self._catching:
            self._catch_up_all()

    def _catch_up_all(self) -> None:
        for owner, held in list(self._held.items()):
            with self._read() as conn:
                found = self._changes.since(conn, held.position)
                if found is None:
                    self._forget(owner)  # the log does not reach back: built again
                    self._consider(owner)
                    continue
                with held.lock:
                    self._catch_up(conn, held, found)
            if held.dirty:
                with held.lock:
                    held.commit()
                if len(held) < self.min_memories * KEPT:
                    self._forget(owner)  # shrunk: the store's search is quick enough again

    def _catch_up(
        self, conn: Connection, held: TenantKeywords, found: tuple[list[int], object]
    ) -> None:
        seqs, position = found
        m = memories.c
        current = {}
        for start in range(0, len(seqs), 500):
            part = seqs[start : start + 500]
            current.update(
                (row.seq, row)
                for row in conn.execute(
                    select(m.seq, m.owner, m.search_stems, m.session_id).where(m.seq.in_(part))
                )
            )
        for seq in seqs:
            row = current.get(seq)
            if row is not None and row.owner == held.owner:
                held.put(seq, row.search_stems, row.session_id)
            else:
                held.drop(seq)
        held.position = position

    def close(self) -> None:
        self._stop.set()
        self._committer.join(timeout=10)
        self._stop_building()
