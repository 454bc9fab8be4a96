"""The extraction outbox: a chat's texts wait in the database until their facts are stored.

The request writes the rows (one per text) and a job names one by id; the job stores the
facts and deletes the row in one transaction. A job that is lost (a Redis restart, a killed
process) leaves its row, and `stale` finds it for the sweep to queue again. Running a row
twice is harmless: facts are upserts, and a deleted row is simply gone.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Sequence
from datetime import timedelta

from sqlalchemy import delete, func, insert, select, update

from omniroute.core.clock import to_iso
from omniroute.core.db.tables import extraction_outbox
from omniroute.memory.backends.base import NewMemory
from omniroute.memory.extraction import MAX_TEXT_CHARS, fact_memories, store_facts
from omniroute.memory.model import Memory
from omniroute.memory.store import MemoryStore

# How old a row must be before the sweep takes its job for lost.
STALE_SECONDS = 60
# A row queued this many times by the sweep without success stays for a person to look at.
MAX_REQUEUES = 10


# Where facts go when the local store is not the primary backend: None means the store.
RemoteWriter = Callable[[], Callable[[NewMemory], Memory] | None]


class ExtractionOutbox:
    def __init__(self, store: MemoryStore, remote_writer: RemoteWriter = lambda: None) -> None:
        """`remote_writer()` is the primary backend's create when it is not the local store
        (asked at each run: the settings may change)."""
        self.store = store
        self._remote_writer = remote_writer

    def put(
        self,
        api_key_id: str,
        session_id: str,
        texts: Sequence[tuple[str, str]],
        user_id: str = "",
    ) -> list[str]:
        """Keep (text, source) pairs for extraction, for the key's end user `user_id` when
        named; return their row ids.

        A chat may hold NUL characters (the provider gets it as sent); no database text can,
        and no fact needs one, so the kept text drops them.
        """
        texts = [(text.replace("\x00", ""), source) for text, source in texts]
        rows = [
            {
                "id": str(uuid.uuid4()),
                "api_key_id": api_key_id,
                "session_id": session_id,
                "user_id": user_id,
                "source": source,
                "text": text[-MAX_TEXT_CHARS:],  # all that extraction reads
                "created_at": self.store.now(),
                "requeued": 0,
            }
            for text, source in texts
            if text.strip()
        ]
        if rows:
            with self.store.db.write() as conn:
                conn.execute(insert(extraction_outbox), rows)
        return [row["id"] for row in rows]

    def process(self, entry_id: str) -> int | None:
        """Store the facts of one row and delete it; the number of facts, None if it is gone.

        With a remote primary the facts go there first, and the row goes only after every
        one was taken: a failure leaves the row for the job's retry or the sweep."""
        write = self._remote_writer()
        if write is not None:
            with self.store.db.read() as conn:
                row = conn.execute(
                    select(extraction_outbox).where(extraction_outbox.c.id == entry_id)
                ).first()
            if row is None:
                return None
            count = self._send(
                write, row.api_key_id, row.session_id, row.text, row.source, row.user_id
            )
            with self.store.db.write() as conn:
                conn.execute(delete(extraction_outbox).where(extraction_outbox.c.id == entry_id))
            return count
        with self.store.db.write() as conn:
            row = conn.execute(
                select(extraction_outbox).where(extraction_outbox.c.id == entry_id)
            ).first()
            if row is None:
                return None
            ids = store_facts(
                self.store,
                api_key_id=row.api_key_id,
                session_id=row.session_id,
                text=row.text,
                source=row.source,
                user_id=row.user_id,
                connection=conn,
            )
            conn.execute(delete(extraction_outbox).where(extraction_outbox.c.id == entry_id))
        if ids:
            self.store.notify_write()
        return len(ids)

    def store_text(
        self, api_key_id: str, session_id: str, text: str, source: str, user_id: str = ""
    ) -> int:
        """Store the facts of a text that has no row (a job that carries its text)."""
        write = self._remote_writer()
        if write is not None:
            return self._send(write, api_key_id, session_id, text, source, user_id)
        found = store_facts(
            self.store, api_key_id=api_key_id, session_id=session_id, text=text, source=source,
            user_id=user_id,
        )  # fmt: skip
        return len(found)

    @staticmethod
    def _send(write, api_key_id: str, session_id: str, text: str, source: str, user_id: str) -> int:
        found = fact_memories(
            api_key_id=api_key_id, session_id=session_id, text=text, source=source,
            user_id=user_id,
        )  # fmt: skip
        for new in found:
            write(new)
        return len(found)

    def stale(self, older_than: float = STALE_SECONDS, limit: int = 500) -> list[str]:
        """Rows older than `older_than` seconds (their job is likely lost), oldest first;
        each is counted as queued again."""
        cutoff = to_iso(self.store.clock() - timedelta(seconds=older_than))
        with self.store.db.write() as conn:
            ids = list(
                conn.execute(
                    select(extraction_outbox.c.id)
                    .where(
                        extraction_outbox.c.created_at < cutoff,
                        extraction_outbox.c.requeued < MAX_REQUEUES,
                    )
                    .order_by(extraction_outbox.c.created_at)
                    .limit(limit)
                ).scalars()
            )
            if ids:
                conn.execute(
                    update(extraction_outbox)
                    .where(extraction_outbox.c.id.in_(ids))
                    .values(requeued=extraction_outbox.c.requeued + 1)
                )
        return ids

    def pending(self) -> int:
        with self.store.db.read() as conn:
            return conn.execute(select(func.count()).select_from(extraction_outbox)).scalar_one()
