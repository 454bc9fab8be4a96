"""The memory store: upsert, get, update, delete, list and access telemetry.

Every write records a memory_history row (history.py) in the same transaction. Each method
opens its own transaction, or joins the caller's when given `connection=`.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import AbstractContextManager, contextmanager
from dataclasses import replace
from datetime import datetime
from functools import cached_property
from typing import Any, Protocol

from sqlalchemy import (
    Connection,
    and_,
    bindparam,
    delete,
    select,
    update,
)

from omniroute.core.clock import to_iso, utc_now
from omniroute.core.db import Database
from omniroute.core.db.read_cache import ReadCache
from omniroute.core.db.tables import memories
from omniroute.core.text_rules import check_fields
from omniroute.memory import history as audit
from omniroute.memory.conditions import live_matching
from omniroute.memory.model import MEMORY_COLUMNS, Memory, MemoryFilter, dump_metadata
from omniroute.memory.search.stemming import search_stems
from omniroute.memory.search.vectors import VectorIndex

# `get` answers from this cache. Writes in this process invalidate it at once; writes made by
# other processes (the RQ worker) are seen after at most this many seconds.
CACHE_TTL_SECONDS = 5.0
CACHE_MAX_ENTRIES = 500

_UNSET: Any = object()
# What an item of create_many may give besides its key, metadata and api_key_id.
ITEM_FIELDS = ("session_id", "type", "content", "expires_at", "user_id")


class Mirror(Protocol):
    def mark(self, conn: Connection, items: Iterable[tuple[str, str]], action: str) -> None:
        """Record (memory id, api key id) pairs whose point must be upserted or deleted."""


# The fields a mirror's copy carries (its vector and payload): a change of any is sent on.
MIRRORED_FIELDS = ("content", "key", "type", "session_id", "expires_at")


class MemoryNotFound(LookupError):
    pass


class KeyConflict(ValueError):
    """Another live memory of the same owner already has this key."""


class MemoryStore:
    def __init__(
        self,
        database: Database,
        clock: Callable[[], datetime] = utc_now,
        vectors: VectorIndex | None = None,
        on_write: Callable[[], None] | None = None,
        mirror: Mirror | None = None,
    ) -> None:
        self.db = database
        self.clock = clock
        # Deleting a memory, or changing its text, deletes its vector in the same transaction.
        self.vectors = vectors
        # Called after a write of ours commits that left a memory without a vector (the app
        # passes "request a backfill"): the store knows nothing of queues.
        self._on_write = on_write
        self._quiet = False
        # Told of every memory whose vector elsewhere (Qdrant) must change, in the same
        # transaction: the mirror keeps its own record of what it has yet to do.
        self._mirror = mirror
        self._cache: ReadCache[Memory] = ReadCache(CACHE_MAX_ENTRIES, CACHE_TTL_SECONDS)

    def now(self) -> str:
        return to_iso(self.clock())

    @contextmanager
    def joined(
        self, connection: Connection | None, begin: Callable[[], AbstractContextManager]
    ) -> Iterator[Connection]:
        """The caller's connection when given, else a transaction of our own from `begin`."""
        if connection is not None:
            yield connection
        else:
            with begin() as own:
                yield own

    @property
    def cache_hits(self) -> int:
        return self._cache.hits

    @property
    def cache_misses(self) -> int:
        return self._cache.misses

    def _forget(self, *memory_ids: str, conn: Connection | None = None) -> None:
        """Drop memories from the get-cache now and, when `conn` is writing them, again
        once it commits: a reader in between may have cached the row as it was."""
        self._cache.forget(*memory_ids)
        if conn is not None:
            self.db.after_commit(conn, lambda: self._cache.forget(*memory_ids))

    # -- writes ---------------------------------------------------------------------------

    def create(
        self,
        *,
        api_key_id: str,
        key: str,
        content: str,
        type: str = "factual",
        session_id: str = "",
        metadata: Mapping[str, Any] | None = None,
        expires_at: str | None = None,
        user_id: str = "",
        connection: Connection | None = None,
    ) -> tuple[Memory, bool]:
        """Upsert on (api_key_id, user_id, key); return the memory and whether it was created.

        An existing live row keeps its id, created_at and access telemetry; its metadata is
        merged (new values win). An expired row counts as absent: it is deleted and replaced.
        `user_id` names the end user of the key it belongs to ('' for the key's own).
        """
        check_fields(
            key=key, content=content, session_id=session_id, metadata=metadata, user_id=user_id
        )
        now = self.now()
        fields = {
            "session_id": session_id,
            "type": type,
            "content": content,
            "expires_at": expires_at,
            "user_id": user_id,
        }
        with self.joined(connection, self.db.write) as conn:
            # Insert first: a new key (an import's every memory) costs one statement.
            memory = _new_memory(api_key_id, key, metadata, fields, now)
            created = bool(self._insert(conn, [memory], now))
            if not created:  # the key is taken
                existing = self._row(conn, *_holder(api_key_id, user_id, key))
                if existing is None or existing.is_expired(now):  # absent, or as good as
                    if existing is not None:
                        self.delete_row(conn, existing, now, "expired")
                    memory = _new_memory(api_key_id, key, metadata, fields, now)
                    created = bool(self._insert(conn, [memory], now))
                else:
                    merged = {**existing.metadata, **(metadata or {})}
                    memory = self._apply(conn, existing, {**fields, "metadata": merged}, now)
        if connection is None:
            self.notify_write()
        return memory, created

    def create_many(
        self, items: list[dict[str, Any]], connection: Connection
    ) -> list[tuple[Memory, bool]]:
        """`create` for each item (its keyword arguments), in order, in `connection`: every
        new key in one multi-row INSERT with its history rows and mirror marks in one
        statement each; a taken key (or one the batch holds twice) then goes through `create`.
        On PostgreSQL each statement is a round trip: one a memory held an import of a
        million to 962 a second (docs/benchmarks.md, "Ingestion at scale")."""
        now = self.now()
        fresh = []
        for item in items:
            fields = {name: item[name] for name in ITEM_FIELDS if name in item}
            check_fields(key=item["key"], metadata=item.get("metadata"), **fields)
            fields = {"session_id": "", "type": "factual", "expires_at": None, "user_id": "",
                      **fields}  # fmt: skip
            fresh.append(_new_memory(item["api_key_id"], item["key"], item.get("metadata"),
                                     fields, now))  # fmt: skip
        inserted = self._insert(connection, fresh, now) if fresh else set()
        return [
            (memory, True) if memory.id in inserted else self.create(**item, connection=connection)
            for item, memory in zip(items, fresh, strict=True)
        ]

    def update(
        self,
        memory_id: str,
        *,
        type: str = _UNSET,
        key: str = _UNSET,
        content: str = _UNSET,
        metadata: Mapping[str, Any] = _UNSET,
        session_id: str = _UNSET,
        expires_at: str | None = _UNSET,
        connection: Connection | None = None,
        reason: str | None = None,
    ) -> Memory:
        """Change the given fields of a live memory; metadata is replaced, not merged.

        `reason` is the life cycle's, for the history row (a person's edit has none)."""
        given = {
            "type": type,
            "key": key,
            "content": content,
            "metadata": metadata,
            "session_id": session_id,
            "expires_at": expires_at,
        }
        changes = {name: value for name, value in given.items() if value is not _UNSET}
        check_fields(**changes)
        now = self.now()
        with self.joined(connection, self.db.write) as conn:
            existing = self._live_row(conn, memory_id, now)
            if "key" in changes and changes["key"] != existing.key:
                self.db.take_turns(conn, "memory-key", existing.owner, changes["key"])
                holder = self._row(
                    conn, *_holder(existing.api_key_id, existing.user_id, changes["key"])
                )
                if holder is not None and holder.is_expired(now):
                    self.delete_row(conn, holder, now, "expired")
                elif holder is not None:
                    raise KeyConflict(f"key {changes['key']!r} is already used by {holder.id}")
            memory = self._apply(conn, existing, changes, now, reason)
        if connection is None:
            self.notify_write()
        return memory

    def notify_write(self) -> None:
        """Tell whoever listens that memories changed and may need vectors (after a commit)."""
        if self._on_write is not None and not self._quiet:
            self._on_write()

    @contextmanager
    def quiet(self) -> Iterator[None]:
        """Tell no listener about writes inside the block (a bulk import embeds at its end,
        in large batches, instead of beside itself in small ones)."""
        self._quiet = True
        try:
            yield
        finally:
            self._quiet = False

    def delete(self, memory_id: str, *, connection: Connection | None = None) -> bool:
        """Delete a memory, expired or not; return False when there was none."""
        with self.joined(connection, self.db.write) as conn:
            existing = self._row(conn, memories.c.id == memory_id)
            if existing is None:
                return False
            self.delete_row(conn, existing, self.now())
        if connection is None:
            self.notify_write()
        return True

    def record_access(self, counts: Mapping[str, int]) -> None:
        """Add each memory's number of injections to its count, and stamp the time."""
        if not counts:
            return
        now = self.now()
        with self.db.write() as conn:
            conn.execute(
                update(memories)
                .where(memories.c.id == bindparam("memory_id"))
                .values(
                    access_count=memories.c.access_count + bindparam("uses"),
                    last_accessed_at=now,
                ),
                [{"memory_id": memory_id, "uses": uses} for memory_id, uses in counts.items()],
            )
        self._forget(*counts)

    # -- reads ----------------------------------------------------------------------------

    def get(self, memory_id: str) -> Memory | None:
        """Return a live memory by id, or None when it does not exist or has expired."""
        now = self.now()
        memory = self._cache.get(memory_id, lambda: self._read_row(memory_id))
        return None if memory is None or memory.is_expired(now) else memory

    def _read_row(self, memory_id: str) -> Memory | None:
        with self.db.read() as conn:
            return self._row(conn, memories.c.id == memory_id)

    def get_by_key(self, api_key_id: str, key: str, user_id: str = "") -> Memory | None:
        """The live memory of the key (of one of its users, if named) with this key, or None."""
        with self.db.read() as conn:
            memory = self._row(conn, *_holder(api_key_id, user_id, key))
        return None if memory is None or memory.is_expired(self.now()) else memory

    def find(
        self,
        filters: MemoryFilter,
        *,
        limit: int = 50,
        offset: int = 0,
        connection: Connection | None = None,
    ) -> list[Memory]:
        """Live memories matching the filters, newest first."""
        with self.joined(connection, self.db.read) as conn:
            rows = conn.execute(
                select(memories)
                .where(*self.live_conditions(filters))
                .order_by(memories.c.created_at.desc(), memories.c.seq.desc())
                .limit(limit)
                .offset(offset)
            ).mappings()
            return [Memory.from_row(row) for row in rows]

    def history(self, memory_id: str) -> list[dict[str, Any]]:
        """Return the audit rows of one memory, oldest first (kept after it is deleted)."""
        with self.db.read() as conn:
            return audit.entries(conn, memory_id)

    def live_conditions(self, filters: MemoryFilter) -> list[Any]:
        """SQL conditions for live memories (not expired) matching the filters."""
        return live_matching(filters, self.now())

    # -- row helpers ----------------------------------------------------------------------

    @staticmethod
    def _row(conn: Connection, *where: Any) -> Memory | None:
        row = conn.execute(select(memories).where(and_(*where))).mappings().first()
        return Memory.from_row(row) if row is not None else None

    def _live_row(self, conn: Connection, memory_id: str, now: str) -> Memory:
        existing = self._row(conn, memories.c.id == memory_id)
        if existing is None or existing.is_expired(now):
            raise MemoryNotFound(memory_id)
        return existing

    @cached_property
    def _insert_statement(self):
        """One statement, its values bound at each call: built with `.values(**row)` it was
        remade each time, and making it took most of an insert (bench: a bulk import)."""
        return (
            self.db.insert(memories)
            .on_conflict_do_nothing(
                index_elements=[memories.c.api_key_id, memories.c.user_id, memories.c.key]
            )
            .returning(memories.c.id)
        )

    def _insert(self, conn: Connection, fresh: list[Memory], now: str) -> set[str]:
        """Insert new memories, with their history rows and mirror marks; the ids written
        (not those whose key another row holds, or another writer's took meanwhile).

        ON CONFLICT DO NOTHING waits for that writer's transaction, so its row is there to
        read and update. On SQLite one writer runs at a time and it never happens; on
        PostgreSQL it is how two upserts of one key meet, holding no lock beyond the row (an
        advisory lock per key ran out of lock slots at 20k writes in one transaction). Many
        rows are one statement (SQLAlchemy's multi-row VALUES for an executemany with
        RETURNING), and so are their history rows and marks.
        """
        rows = [self._row_values(memory) for memory in fresh]
        inserted = set(conn.execute(self._insert_statement, rows).scalars())
        made = [memory for memory in fresh if memory.id in inserted]
        if made:
            audit.record_creates(conn, made, now)
            if self._mirror is not None:
                self._mirror.mark(conn, [(m.id, m.api_key_id) for m in made], "upsert")
        return inserted

    @staticmethod
    def _row_values(memory: Memory) -> dict[str, Any]:
        """A new memory's row, as the insert statement binds it."""
        return {
            **{name: getattr(memory, name) for name in MEMORY_COLUMNS},
            "metadata": dump_metadata(memory.metadata),
            "needs_reindex": 1,
            "search_stems": search_stems(memory.content, memory.key, memory.metadata),
        }

    def _apply(
        self,
        conn: Connection,
        existing: Memory,
        changes: dict[str, Any],
        now: str,
        reason: str | None = None,
    ) -> Memory:
        memory = replace(existing, **changes, updated_at=now)
        values = {name: getattr(memory, name) for name in changes}
        if "metadata" in values:
            values["metadata"] = dump_metadata(memory.metadata)
        if memory.content != existing.content or memory.key != existing.key:
            values["needs_reindex"] = 1
            self._forget_vector(conn, existing.id)
        if {"content", "key", "metadata"} & set(values):
            values["search_stems"] = search_stems(memory.content, memory.key, memory.metadata)
        conn.execute(
            update(memories).where(memories.c.id == existing.id).values(**values, updated_at=now)
        )
        if audit.differs(existing, memory):
            audit.record(conn, "update", existing, memory, now, reason)
        if any(getattr(memory, name) != getattr(existing, name) for name in MIRRORED_FIELDS):
            self._mirrored(conn, memory, "upsert")
        self._forget(existing.id, conn=conn)
        return memory

    def _mirrored(self, conn: Connection, memory: Memory, action: str) -> None:
        if self._mirror is not None:
            self._mirror.mark(conn, [(memory.id, memory.api_key_id)], action)

    def _forget_vector(self, conn: Connection, memory_id: str) -> None:
        if self.vectors is not None and self.db.vectors.available:
            seq = conn.execute(select(memories.c.seq).where(memories.c.id == memory_id)).scalar()
            if seq is not None:
                self.vectors.delete(conn, [seq])

    def delete_row(
        self, conn: Connection, existing: Memory, now: str, reason: str | None = None
    ) -> None:
        """Delete one memory with its vector, history row and mirror mark, in `conn`."""
        self.delete_rows(conn, [existing], now, reason)

    def delete_rows(
        self, conn: Connection, doomed: Sequence[Memory], now: str, reason: str | None = None
    ) -> None:
        """Delete memories with their vectors, history rows and mirror marks, in `conn`, a
        few statements for the lot (the keyword index follows by trigger)."""
        if not doomed:
            return
        ids = [memory.id for memory in doomed]
        if self.vectors is not None and self.db.vectors.available:
            seqs = conn.execute(select(memories.c.seq).where(memories.c.id.in_(ids))).scalars()
            self.vectors.delete(conn, list(seqs))
        conn.execute(delete(memories).where(memories.c.id.in_(ids)))
        audit.record_deletes(conn, doomed, now, reason)
        if self._mirror is not None:
            self._mirror.mark(conn, [(m.id, m.api_key_id) for m in doomed], "delete")
        self._forget(*ids, conn=conn)


def _holder(api_key_id: str, user_id: str, key: str) -> tuple[Any, ...]:
    """Conditions for the memory that holds `key` for a key (and one of its users)."""
    return (
        memories.c.api_key_id == api_key_id,
        memories.c.user_id == user_id,
        memories.c.key == key,
    )


def _new_memory(
    api_key_id: str, key: str, metadata: Mapping[str, Any] | None, fields: dict[str, Any], now: str
) -> Memory:
    """A memory about to be inserted: a new id, created and updated now."""
    return Memory(
        id=str(uuid.uuid4()),
        api_key_id=api_key_id,
        key=key,
        metadata=dict(metadata or {}),
        created_at=now,
        updated_at=now,
        **fields,
    )
