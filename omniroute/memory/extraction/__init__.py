"""Fact extraction: find preferences, decisions and habits in text, and store them.

Rules (REFERENCE section 3, with our fixes): only the last 64 KiB of a text is read; a
fact's subject must have 3 or more characters (or be a capitalised two-letter name such as
"Go" or "Qt": short names of languages and tools are real preferences) and its content is
cut to 500; facts are found category by category, pattern by pattern, in text order, and a
key found twice in one text counts once; a statement inside a question is not a fact. Keys
keep every script's letters (the reference reduced non-ASCII facts all to "preference:", so
they overwrote each other). Beyond the reference, "my name is X" ("ik heet X", "ich heiße
X") is a `profile:name` fact.
"""

from __future__ import annotations

import hashlib
import re
import unicodedata
from collections.abc import Iterator, Mapping
from contextlib import nullcontext
from dataclasses import dataclass
from typing import Any

from sqlalchemy import Connection

from omniroute.core.clock import now_iso
from omniroute.memory.backends.base import NewMemory
from omniroute.memory.extraction.patterns import CATEGORIES, CATEGORY_TYPES, PATTERNS
from omniroute.memory.store import MemoryStore

MAX_TEXT_CHARS = 64 * 1024
MIN_SUBJECT_CHARS = 3
# Two-letter words that are never a name, whatever their case ("I like It", "Ik haat Je").
SHORT_NON_NAMES = frozenset(
    {"it", "me", "us", "we", "he", "so", "to", "do", "no", "ok", "es", "er", "je", "ze", "du"}
)
MAX_CONTENT_CHARS = 500
MAX_SLUG_CHARS = 40
SOURCES = ("user_message", "llm_response")

_WHITESPACE = re.compile(r"\s+")
_NON_WORD = re.compile(r"[\W_]+")
_SENTENCE_END = re.compile(r"[.!?\n]")
# Typographic apostrophes (phones type them) read as the ASCII one the patterns expect.
_APOSTROPHES = str.maketrans({"\u2019": "'", "\u2018": "'", "\u02bc": "'"})


@dataclass(frozen=True)
class Fact:
    category: str
    type: str
    key: str
    content: str
    language: str


def slug(text: str) -> str:
    """Lowercase; every run of non-letters and non-digits (any script) becomes `_`."""
    folded = unicodedata.normalize("NFKC", text).casefold()
    value = _NON_WORD.sub("_", folded)[:MAX_SLUG_CHARS].strip("_")
    return value or hashlib.sha256(folded.encode("utf-8")).hexdigest()[:12]


def _visible_length(text: str) -> int:
    """Length with East Asian wide characters counted twice: "寿司" is a word, "it" is not."""
    return sum(2 if unicodedata.east_asian_width(c) in "WF" else 1 for c in text)


def _is_subject(text: str) -> bool:
    """Long enough to be about something: 3 or more, or a name like "Go", "Qt" or "C#"."""
    length = _visible_length(text)
    if length >= MIN_SUBJECT_CHARS:
        return True
    return length == 2 and text[0].isupper() and text.casefold() not in SHORT_NON_NAMES


def _in_question(text: str, start: int) -> bool:
    """Whether the sentence that holds `start` ends with "?": "Do I prefer Go?" is no fact."""
    end = _SENTENCE_END.search(text, start)
    return end is not None and end[0] == "?"


def _clean(text: str) -> str:
    return _WHITESPACE.sub(" ", text).strip()


def extract_facts(text: str) -> list[Fact]:
    """Return the facts in `text`, without storing them."""
    if not text:
        return []
    text = text[-MAX_TEXT_CHARS:].translate(_APOSTROPHES)
    facts, seen = [], set()
    for fact in _candidates(text):
        if fact.key not in seen:
            seen.add(fact.key)
            facts.append(fact)
    return facts


def _candidates(text: str) -> Iterator[Fact]:
    for category in CATEGORIES:
        for pattern in (p for p in PATTERNS if p.category == category):
            for match in pattern.regex.finditer(text):
                if _in_question(text, match.start()):
                    continue
                subject = _clean(pattern.subject(match))
                if not _is_subject(subject):
                    continue
                yield Fact(
                    category=category,
                    type=CATEGORY_TYPES[category],
                    key=f"{category}:{slug(pattern.key_subject or subject)}",
                    content=_clean(match[0])[:MAX_CONTENT_CHARS],
                    language=pattern.language,
                )


def fact_memories(
    *, api_key_id: str, session_id: str, text: str, source: str, user_id: str = ""
) -> list[NewMemory]:
    """The memories of the facts in a chat's `text`, as `api_key_id`'s (its end user
    `user_id`'s when named), ready for any backend; none without a key or a session."""
    if not (text and api_key_id and session_id):
        return []
    return facts_as_memories(
        text, api_key_id=api_key_id, session_id=session_id, source=source, user_id=user_id
    )


def facts_as_memories(
    text: str,
    *,
    api_key_id: str,
    session_id: str,
    source: str,
    user_id: str = "",
    metadata: Mapping[str, Any] | None = None,
) -> list[NewMemory]:
    """The memories of the facts in `text`, each with its category, source, language and
    time of extraction in its metadata, beside `metadata`."""
    extracted_at = now_iso()
    return [
        NewMemory(
            api_key_id=api_key_id,
            key=fact.key,
            content=fact.content,
            type=fact.type,
            session_id=session_id,
            user_id=user_id,
            metadata={
                **(metadata or {}),
                "category": fact.category,
                "source": source,
                "language": fact.language,
                "extractedAt": extracted_at,
            },
        )
        for fact in extract_facts(text)
    ]


def store_facts(
    store: MemoryStore,
    *,
    api_key_id: str,
    session_id: str,
    text: str,
    source: str,
    user_id: str = "",
    connection: Connection | None = None,
) -> list[str]:
    """Extract facts from `text` and upsert them as `api_key_id`'s memories; return their ids.

    In the caller's transaction when given `connection` (the caller then notifies the store).
    """
    found = fact_memories(
        api_key_id=api_key_id, session_id=session_id, text=text, source=source, user_id=user_id
    )
    if not found:
        return []
    ids = []
    with nullcontext(connection) if connection is not None else store.db.write() as conn:
        for new in found:
            memory, _ = store.create(**new.fields(), connection=conn)
            ids.append(memory.id)
    if connection is None:
        store.notify_write()
    return ids
