"""Summarisation: folding aged memories into summaries, and fitting a key into a budget.

Both of the reference's algorithms, without its losses:

- `older_than` (POST /api/memory/summarize, the autoSummarize job): a key's live memories
  created more than `days` ago become `semantic` summary memories of that key alone (never
  one that mixes keys), each of at most CHUNK_TOKENS of lines; in the same transaction the
  originals are deleted with a history row each (reason `summarized`, their text kept
  there), and the summary's metadata lists their ids. Summaries are never summarised again.
- `to_budget` (the reference's summarizeMemories): when a key's memories hold more tokens
  than a budget, the oldest are compacted in place to their first three sentences until the
  rest fit; each is an update with a history row (reason `compacted`), so it is re-embedded,
  mirrored and dropped from the caches like any edit.

The text is extractive unless `summarizeProviderModel` names a chat model (summary_text.py);
an LLM failure falls back to the extractive text and says why.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from itertools import groupby
from typing import Any

from sqlalchemy import func, select

from omniroute.core.clock import to_iso
from omniroute.core.db.tables import memories
from omniroute.memory.conditions import live_matching
from omniroute.memory.life.summary_text import (
    LlmWriter,
    SummaryFailed,
    extractive,
    first_sentences,
    language_of,
)
from omniroute.memory.model import Memory, MemoryFilter
from omniroute.memory.search.tokens import count_tokens
from omniroute.memory.settings import MemorySettings
from omniroute.memory.store import MemoryStore

SUMMARY_KEY_PREFIX = "summary_"
CHUNK_TOKENS = 1000
PREVIEW_ITEMS = 100
BUDGET_SENTENCES = 3  # the reference's rule for compaction in place


@dataclass
class SummaryRun:
    dry_run: bool
    candidates: int = 0
    total_tokens: int = 0
    summary_tokens: int = 0
    deleted_count: int = 0
    summary_ids: list[str] = field(default_factory=list)
    keys: dict[str, dict[str, int]] = field(default_factory=dict)
    items: list[dict[str, Any]] = field(default_factory=list)
    method: str = "extractive"
    model: str | None = None
    fallback_reasons: list[str] = field(default_factory=list)

    def as_dict(self) -> dict[str, Any]:
        return {
            "candidates": self.candidates,
            "totalTokens": self.total_tokens,
            "tokensSaved": max(0, self.total_tokens - self.summary_tokens),
            "deletedCount": self.deleted_count,
            "summaryId": self.summary_ids[0] if self.summary_ids else None,
            "summaryIds": self.summary_ids,
            "dryRun": self.dry_run,
            "keys": [{"apiKeyId": key, **counts} for key, counts in self.keys.items()],
            "items": self.items,
            "writer": {
                "method": self.method,
                "model": self.model,
                "fallbackReason": "; ".join(self.fallback_reasons) or None,
            },
        }


@dataclass
class BudgetRun:
    dry_run: bool
    original_count: int = 0
    summarized_count: int = 0
    tokens_before: int = 0
    tokens_saved: int = 0
    fits: bool = True

    def as_dict(self) -> dict[str, Any]:
        return {
            "originalCount": self.original_count,
            "summarizedCount": self.summarized_count,
            "tokensBefore": self.tokens_before,
            "tokensSaved": self.tokens_saved,
            "fits": self.fits,
            "dryRun": self.dry_run,
        }


class Summarizer:
    def __init__(
        self,
        store: MemoryStore,
        settings: MemorySettings,
        writer: LlmWriter,
        on_saved: Callable[[int], None] = lambda tokens: None,
    ) -> None:
        """`on_saved(tokens)` hears what each real (not dry) run saved."""
        self.store = store
        self.settings = settings
        self.writer = writer
        self._on_saved = on_saved

    # -- by age ---------------------------------------------------------------------------

    def older_than(
        self,
        *,
        days: int,
        api_key_id: str | None = None,
        session_id: str | None = None,
        dry_run: bool = False,
    ) -> SummaryRun:
        cutoff = self.store.clock() - timedelta(days=days)
        found = self._aged(MemoryFilter(api_key_id=api_key_id, session_id=session_id), cutoff)
        model = self.settings.get().summarize_provider_model
        run = SummaryRun(dry_run=dry_run or not found, model=model)
        run.method = "llm" if model else "extractive"
        run.candidates = len(found)
        run.total_tokens = sum(count_tokens(m.content) for m in found)
        run.items = [_preview(m) for m in found[:PREVIEW_ITEMS]]
        # One end user's memories are folded apart from the key's and from each other's: a
        # summary never carries one person's facts into another's retrieval.
        for (owner, user_id), owned in groupby(found, key=lambda m: (m.api_key_id, m.user_id)):
            owned = list(owned)
            counts = run.keys.setdefault(owner, {"candidates": 0, "totalTokens": 0})
            counts["candidates"] += len(owned)
            counts["totalTokens"] += sum(count_tokens(m.content) for m in owned)
            for chunk in _chunks(owned):
                if run.dry_run:  # the extractive text stands for the summary's size
                    run.summary_tokens += count_tokens(extractive(chunk, days))
                    continue
                text, method = self._text(chunk, days, model, run)
                self._fold((owner, user_id), session_id or "", chunk, text, days, method, run)
        if not run.dry_run:
            self._on_saved(max(0, run.total_tokens - run.summary_tokens))
        return run

    def _aged(self, filters: MemoryFilter, cutoff: datetime) -> list[Memory]:
        with self.store.db.read() as conn:
            rows = conn.execute(
                select(memories)
                .where(
                    *live_matching(filters, self.store.now()),
                    memories.c.created_at < to_iso(cutoff),
                    ~memories.c.key.startswith(SUMMARY_KEY_PREFIX, autoescape=True),
                )
                .order_by(
                    memories.c.api_key_id, memories.c.user_id, memories.c.created_at, memories.c.seq
                )
            ).mappings()
            return [Memory.from_row(row) for row in rows]

    def _text(
        self, chunk: Sequence[Memory], days: int, model: str | None, run: SummaryRun
    ) -> tuple[str, str]:
        """The chunk's summary text and how it was written (llm, or extractive)."""
        if model:
            try:
                return self.writer.write(model, chunk), "llm"
            except SummaryFailed as exc:
                run.method = "extractive"  # at least one chunk fell back
                if str(exc) not in run.fallback_reasons:
                    run.fallback_reasons.append(str(exc))
        return extractive(chunk, days), "extractive"

    def _fold(
        self,
        owner: tuple[str, str],
        session_id: str,
        chunk: Sequence[Memory],
        text: str,
        days: int,
        method: str,
        run: SummaryRun,
    ) -> None:
        """One summary of `owner`'s (its key and end user) and the deletion of what it
        covers, in one transaction."""
        now = self.store.now()
        by_id = {memory.id: memory for memory in chunk}
        with self.store.db.write() as conn:
            # Only originals unchanged since they were read: an edit meanwhile keeps its memory.
            unchanged = [
                row.id
                for row in conn.execute(
                    select(memories.c.id, memories.c.updated_at).where(memories.c.id.in_(by_id))
                )
                if row.updated_at == by_id[row.id].updated_at
            ]
            if not unchanged:
                return
            self.store.delete_rows(conn, [by_id[mid] for mid in unchanged], now, "summarized")
            summary, _ = self.store.create(
                api_key_id=owner[0],
                user_id=owner[1],
                key=f"{SUMMARY_KEY_PREFIX}{now}_{uuid.uuid4().hex[:8]}",
                content=text,
                type="semantic",
                session_id=session_id,
                metadata={
                    "summary": True,
                    "summarizedIds": unchanged,
                    "summarizedCount": len(unchanged),
                    "olderThanDays": days,
                    "generatedAt": now,
                    "method": method,
                    "model": run.model if method == "llm" else None,
                    "language": language_of(chunk),
                },
                connection=conn,
            )
        self.store.notify_write()
        run.deleted_count += len(unchanged)
        run.summary_ids.append(summary.id)
        run.summary_tokens += count_tokens(text)

    # -- by budget ------------------------------------------------------------------------

    def to_budget(
        self,
        *,
        api_key_id: str,
        max_tokens: int,
        session_id: str | None = None,
        dry_run: bool = False,
    ) -> BudgetRun:
        """Compact the oldest memories of a key in place until its memories fit `max_tokens`."""
        rows = self.store.find(
            MemoryFilter(api_key_id=api_key_id, session_id=session_id), limit=1_000_000
        )
        run = BudgetRun(dry_run=dry_run, original_count=len(rows))
        run.tokens_before = total = sum(count_tokens(m.content) for m in rows)
        for memory in reversed(rows):  # oldest first
            if total <= max_tokens:
                break
            if memory.key.startswith(SUMMARY_KEY_PREFIX):
                continue
            language = memory.metadata.get("language", "en")
            short = first_sentences(memory.content, BUDGET_SENTENCES, language)
            saved = count_tokens(memory.content) - count_tokens(short)
            if saved <= 0:
                continue
            if not dry_run:
                self.store.update(memory.id, content=short, reason="compacted")
            total -= saved
            run.tokens_saved += saved
            run.summarized_count += 1
        run.fits = total <= max_tokens
        if not dry_run:
            self._on_saved(run.tokens_saved)
        return run

    def keys_over(self, max_tokens: int) -> list[str]:
        """The keys whose live memories hold more than `max_tokens` (estimated in SQL)."""
        tokens = func.sum((func.length(memories.c.content) + 3) / 4)
        with self.store.db.read() as conn:
            rows = conn.execute(
                select(memories.c.api_key_id)
                .where(*live_matching(MemoryFilter(), self.store.now()))
                .group_by(memories.c.api_key_id)
                .having(tokens > max_tokens)
            )
            return [row.api_key_id for row in rows]

    # -- the periodic job -----------------------------------------------------------------

    def auto(self) -> dict[str, Any]:
        """autoSummarize: fold each key's aged memories, then fit each key into the budget."""
        settings = self.settings.get()
        if not settings.auto_summarize:
            return {"off": "the autoSummarize setting is off"}
        run = self.older_than(days=settings.auto_summarize_days)
        report: dict[str, Any] = {
            "summarized": run.deleted_count,
            "summaries": len(run.summary_ids),
            "writer": run.as_dict()["writer"],
        }
        budget = settings.summarize_budget_tokens
        if budget:
            compacted = [
                self.to_budget(api_key_id=key, max_tokens=budget).summarized_count
                for key in self.keys_over(budget)
            ]
            report["compacted"] = sum(compacted)
        return report


def _chunks(owned: Sequence[Memory]) -> Iterator[list[Memory]]:
    """Runs of memories whose extractive lines stay within CHUNK_TOKENS together."""
    chunk: list[Memory] = []
    tokens = 0
    for memory in owned:
        size = count_tokens(first_sentences(memory.content, 1)) + 8
        if chunk and tokens + size > CHUNK_TOKENS:
            yield chunk
            chunk, tokens = [], 0
        chunk.append(memory)
        tokens += size
    if chunk:
        yield chunk


def _preview(memory: Memory) -> dict[str, Any]:
    return {
        "id": memory.id,
        "apiKeyId": memory.api_key_id,
        "type": memory.type,
        "key": memory.key,
        "tokens": count_tokens(memory.content),
        "createdAt": memory.created_at,
    }
