"""Keyword search on Snowball stems, the same on both stores: a memory is stemmed in its own
language (named by its metadata or detected), a query in every language, diacritics fold,
and no query is a syntax error."""

import pytest

from omniroute.memory.search.fts import keyword_search
from omniroute.memory.search.stemming import detect_language, query_stems, search_stems

pytestmark = pytest.mark.both_stores


def found(store, query: str, owner: str = "alice") -> list[str]:
    with store.db.read() as conn:
        hits = keyword_search(conn, owners=(owner,), query=query, now_iso=store.now())
    return [memory.content for memory, _ in hits]


@pytest.mark.parametrize(
    ("language", "content", "query"),
    [
        ("en", "I prefer modern editors", "editor"),
        ("de", "Ich wohne gern in alten Häusern", "haus"),
        ("nl", "Ik werk graag in bibliotheken", "bibliotheek"),
    ],
)
def test_a_memory_is_stemmed_in_its_own_language(store, language, content, query):
    store.create(api_key_id="alice", key="k", content=content, metadata={"language": language})
    assert found(store, query) == [content]


@pytest.mark.parametrize(
    ("content", "query"),
    [
        ("I really prefer the modern editors", "editor"),
        ("Ich wohne seit Jahren sehr gern in den alten Häusern", "haus"),
        ("Ik werk altijd graag in de bibliotheken van de stad", "bibliotheek"),
    ],
)
def test_a_memory_without_a_language_is_stemmed_in_the_one_it_is_written_in(store, content, query):
    store.create(api_key_id="alice", key="k", content=content)
    assert found(store, query) == [content]


def test_one_query_finds_memories_in_every_language_a_key_holds(store):
    store.create(api_key_id="alice", key="a", content="Likes cats", metadata={"language": "en"})
    store.create(api_key_id="alice", key="b", content="Mag Katzen", metadata={"language": "de"})
    assert sorted(found(store, "cat katze")) == ["Likes cats", "Mag Katzen"]


def test_diacritics_fold_in_the_text_and_in_the_query(store):
    store.create(api_key_id="alice", key="a", content="Wohnt in München")
    store.create(api_key_id="alice", key="b", content="Drinks café au lait")
    assert found(store, "munchen") == ["Wohnt in München"]
    assert found(store, "MÜNCHEN") == ["Wohnt in München"]
    assert found(store, "cafe") == ["Drinks café au lait"]


def test_key_words_are_searched_too(store):
    store.create(api_key_id="alice", key="preference:dark_mode", content="Yes, always")
    assert found(store, "dark modes") == ["Yes, always"]


@pytest.mark.parametrize(
    "query",
    ["x' or 1=1 --", "tea & | ! <-> :*", "(((tea", "\\", "'tea'", '"tea" or', "tea:*"],
)
def test_no_query_is_a_syntax_error_and_words_still_match(store, query):
    store.create(api_key_id="alice", key="k", content="Drinks green tea")
    assert found(store, query) == (["Drinks green tea"] if "tea" in query else [])


def test_the_index_follows_a_change_of_content_and_language(store):
    memory, _ = store.create(api_key_id="alice", key="k", content="Mag Katzen")
    assert found(store, "katze") == [], "too short to tell: indexed as English"
    store.update(memory.id, metadata={"language": "de"})
    assert found(store, "katze") == ["Mag Katzen"]
    store.update(memory.id, content="Mag Hunde")
    assert found(store, "katze") == [] and found(store, "hund") == ["Mag Hunde"]


@pytest.mark.parametrize(
    ("text", "language"),
    [
        ("I would like the window seat, please", "en"),
        ("Ik wil graag een plaats bij het raam", "nl"),
        ("Ich möchte bitte einen Fensterplatz haben", "de"),
        ("Sushi", "en"),
        ("", "en"),
    ],
)
def test_the_language_is_told_by_its_own_stop_words(text, language):
    assert detect_language(text) == language


def test_stop_words_are_not_indexed_and_stems_fold():
    assert search_stems("I am running to München", "trip:plan", {"language": "en"}) == (
        "run munchen trip plan"
    )
    assert sorted(query_stems(["häuser"])) == ["haus", "hauser"]
