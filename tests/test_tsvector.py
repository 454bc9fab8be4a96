"""Keyword search on PostgreSQL: the memory's language stems it, diacritics fold, no syntax.

What both stores share (owner scoping, expiry, sessions, ranking) runs on both in
test_store.py and test_fts.py; this is what only the tsvector side does.
"""

import re
import unicodedata

import pytest

from omniroute import migrate
from omniroute.db import Database
from omniroute.memory.fts import keyword_search
from omniroute.memory.store import MemoryStore


@pytest.fixture
def pg_store(pg_database, clock):
    pg_database.empty()
    database = Database(pg_database.url)
    yield MemoryStore(database, clock=clock)
    database.dispose()


def found(store: MemoryStore, query: str, owner: str = "alice") -> list[str]:
    with store.db.read() as conn:
        hits = keyword_search(conn, api_key_id=owner, query=query, now_iso=store.now())
    return [memory.content for memory, _ in hits]


def test_the_fold_table_is_unicodes_own_decomposition_of_latin_letters():
    sql = (migrate.MIGRATIONS_DIR / "postgresql" / "0001_memories.sql").read_text()
    source, target = re.search(r"translate\(\s*value,\s*'([^']+)',\s*'([^']+)'", sql).groups()
    expected = {}
    for code in [*range(0xC0, 0x250), *range(0x1E00, 0x1F00)]:
        letter = chr(code)
        decomposed = unicodedata.normalize("NFKD", letter)
        base = "".join(c for c in decomposed if not unicodedata.combining(c))
        if len(base) == 1 and base.isascii() and base.isalpha() and base != letter:
            expected[letter] = base
    assert dict(zip(source, target, strict=True)) == expected


@pytest.mark.parametrize(
    ("language", "content", "query"),
    [
        ("en", "I prefer modern editors", "editor"),
        ("de", "Ich wohne gern in alten Häusern", "haus"),
        ("nl", "Ik werk graag in bibliotheken", "bibliotheek"),
    ],
)
def test_a_memory_is_stemmed_in_its_own_language(pg_store, language, content, query):
    pg_store.create(api_key_id="alice", key="k", content=content, metadata={"language": language})
    assert found(pg_store, query) == [content]


def test_a_memory_without_a_language_matches_its_words_exactly(pg_store):
    pg_store.create(api_key_id="alice", key="k", content="I prefer modern editors")
    assert found(pg_store, "editors") == ["I prefer modern editors"]
    assert found(pg_store, "editor") == [], "simple: no stemming without a language"


def test_one_query_finds_memories_in_every_language_a_key_holds(pg_store):
    pg_store.create(api_key_id="alice", key="a", content="Likes cats", metadata={"language": "en"})
    pg_store.create(api_key_id="alice", key="b", content="Mag Katzen", metadata={"language": "de"})
    assert sorted(found(pg_store, "cat katze")) == ["Likes cats", "Mag Katzen"]


def test_diacritics_fold_in_the_text_and_in_the_query(pg_store):
    pg_store.create(api_key_id="alice", key="a", content="Wohnt in München")
    pg_store.create(api_key_id="alice", key="b", content="Drinks café au lait")
    assert found(pg_store, "munchen") == ["Wohnt in München"]
    assert found(pg_store, "MÜNCHEN") == ["Wohnt in München"]
    assert found(pg_store, "cafe") == ["Drinks café au lait"]


@pytest.mark.parametrize(
    "query",
    ["x' or 1=1 --", "tea & | ! <-> :*", "(((tea", "\\", "'tea'", '"tea" or', "tea:*"],
)
def test_no_query_is_a_syntax_error_and_words_still_match(pg_store, query):
    pg_store.create(api_key_id="alice", key="k", content="Drinks green tea")
    hits = found(pg_store, query)
    assert hits == (["Drinks green tea"] if "tea" in query else [])


def test_the_index_follows_a_change_of_language(pg_store):
    memory, _ = pg_store.create(api_key_id="alice", key="k", content="Mag Katzen")
    assert found(pg_store, "katze") == []
    pg_store.update(memory.id, metadata={"language": "de"})
    assert found(pg_store, "katze") == ["Mag Katzen"]
