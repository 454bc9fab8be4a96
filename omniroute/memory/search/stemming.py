"""Snowball stems for keyword search, in English, Dutch and German, the same on both stores.

A memory is indexed by the stems of its content and key in its own language: the
`language` its metadata names (extraction records en, nl or de), else the one its words
say (`detect_language`). The stems are written to `memories.search_stems` with the row,
and each store only splits that text (FTS5's unicode61 on SQLite, the `simple`
configuration on PostgreSQL), so both find the same memories. A query's language is not
known, so each of its topic words is stemmed by every language's stemmer and the stems
are OR-ed: "editors" finds an English "editor", "Katzen" a German "Katze", in one key that
holds both. Diacritics are folded after stemming on both sides ("munchen" finds "München").
Stop words are not indexed: no query searches for them.
"""

from __future__ import annotations

import re
import threading
import unicodedata
from collections.abc import Mapping
from functools import lru_cache
from typing import Any

import Stemmer

from omniroute.memory.search.stopwords import DUTCH, ENGLISH, GERMAN, STOP_WORDS

# The memory languages and their Snowball stemmers.
LANGUAGES = {"en": "english", "nl": "dutch", "de": "german"}
DEFAULT_LANGUAGE = "en"
_WORD = re.compile(r"[^\W_]+")  # a word of any script; `_` and `:` split keys into words
# Each language's stop words that the others do not share: what tells them apart.
_MARKERS = {
    "en": frozenset(ENGLISH) - frozenset(DUTCH) - frozenset(GERMAN),
    "nl": frozenset(DUTCH) - frozenset(ENGLISH) - frozenset(GERMAN),
    "de": frozenset(GERMAN) - frozenset(ENGLISH) - frozenset(DUTCH),
}
_local = threading.local()  # a PyStemmer Stemmer is not safe to share between threads


def _stemmer(language: str) -> Stemmer.Stemmer:
    stemmers = getattr(_local, "stemmers", None)
    if stemmers is None:
        stemmers = _local.stemmers = {
            code: Stemmer.Stemmer(name) for code, name in LANGUAGES.items()
        }
    return stemmers[language]


def words_of(text: str) -> list[str]:
    """The case-folded words of `text`, stop words left out."""
    return [w for w in (t.casefold() for t in _WORD.findall(text)) if w not in STOP_WORDS]


def detect_language(text: str) -> str:
    """en, nl or de: the language whose own stop words `text` holds most (English on a tie,
    and for text with none: a short note is indexed as the gateway's default)."""
    counts = dict.fromkeys(LANGUAGES, 0)
    for token in _WORD.findall(text):
        token = token.casefold()
        for language, markers in _MARKERS.items():
            if token in markers:
                counts[language] += 1
    best = max(counts.values())
    if best == 0 or counts[DEFAULT_LANGUAGE] == best:
        return DEFAULT_LANGUAGE
    return max(counts, key=counts.get)


def language_of(content: str, metadata: Mapping[str, Any]) -> str:
    """The language a memory is indexed in: its metadata's, when it is one we stem."""
    named = metadata.get("language")
    return named if named in LANGUAGES else detect_language(content)


def fold(word: str) -> str:
    """`word` without diacritics ("münchen" → "munchen")."""
    if word.isascii():
        return word
    decomposed = unicodedata.normalize("NFKD", word)
    return "".join(c for c in decomposed if not unicodedata.combining(c))


def search_stems(content: str, key: str, metadata: Mapping[str, Any]) -> str:
    """What the keyword index holds of a memory: the stems of its content and key."""
    stemmer = _stemmer(language_of(content, metadata))
    return " ".join(fold(stem) for stem in stemmer.stemWords(words_of(f"{content} {key}")))


def query_stems(words: list[str]) -> list[str]:
    """The distinct stems of a query's topic words in every language, folded."""
    split = [part for word in words for part in _WORD.findall(word)]
    return list(_stems_of(tuple(split)))


@lru_cache(maxsize=4096)
def _stems_of(words: tuple[str, ...]) -> tuple[str, ...]:
    stems = (fold(s) for code in LANGUAGES for s in _stemmer(code).stemWords(list(words)))
    return tuple(dict.fromkeys(stems))
