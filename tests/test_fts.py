import re

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from omniroute.memory.search import fts
from omniroute.memory.search.fts import MAX_TOKENS, keyword_search
from omniroute.memory.search.query_words import topic_words
from omniroute.memory.search.stemming import query_stems

pytestmark = pytest.mark.both_stores


def match_expression(query: str) -> str | None:
    return fts.match_expression(query_stems(topic_words(query)))


FTS_SYNTAX = ['"', "*", "(", ")", ":", "^", "-", "+", "NEAR", "AND", "OR", "NOT", "{", "}"]
queries = st.one_of(
    st.text(),
    st.lists(st.sampled_from([*FTS_SYNTAX, "tea", "ü", "寿司", "_", " "])).map("".join),
)


@settings(max_examples=300, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(query=queries)
def test_no_query_makes_keyword_search_raise(store, query):
    with store.db.read() as conn:
        keyword_search(conn, owners=("alice",), query=query, now_iso=store.now())


@given(query=queries)
def test_the_expression_is_only_quoted_words_joined_by_or(query):
    expression = match_expression(query)
    if expression is not None:
        for part in expression.split(" OR "):
            assert re.fullmatch(r'"[^"]+"', part), part


def test_a_query_without_words_searches_nothing():
    assert match_expression("?! -- ()") is None


def test_duplicate_words_count_once_and_their_number_is_capped():
    assert match_expression("Tea tea TEA") == '"tea"'
    many = " ".join(f"w{i}" for i in range(1000))
    assert match_expression(many).count(" OR ") == MAX_TOKENS - 1


def test_operators_in_the_query_are_searched_as_words(store):
    store.create(api_key_id="alice", key="k", content="Tea AND coffee NEAR the stove")
    with store.db.read() as conn:
        hits = keyword_search(conn, owners=("alice",), query="NEAR", now_iso=store.now())
    assert len(hits) == 1


def test_stop_words_are_left_out_of_a_question():
    assert topic_words("What is my favourite editor?") == ["favourite", "editor"]
    assert topic_words("Wat is mijn favoriete editor?") == ["favoriete", "editor"]
    assert topic_words("Was ist mein Lieblingseditor?") == ["lieblingseditor"]


def test_a_question_of_stop_words_alone_searches_nothing():
    assert match_expression("what do you know about me?") is None


def search(store, query: str, limit: int = 100) -> list[str]:
    with store.db.read() as conn:
        hits = keyword_search(conn, owners=("alice",), query=query, now_iso=store.now(),
                              limit=limit)  # fmt: skip
    return [memory.key for memory, _ in hits]


def test_matches_the_filters_drop_from_the_pool_are_made_up_for(store, monkeypatch):
    monkeypatch.setattr(fts, "POOL_FACTOR", 1)
    store.create(api_key_id="alice", key="kept", content="tea, once")
    for n in range(2):  # the best matches: more tea, but expired
        store.create(api_key_id="alice", key=f"gone{n}", content="tea tea tea tea",
                     expires_at="2000-01-01T00:00:00.000Z")  # fmt: skip
    assert search(store, "tea", limit=2) == ["kept"]


SMALL = ["I drink green tea every morning", "Tea with lemon is my favourite drink",
         "My sister plays the violin", "We drank tea in Lisbon last summer",
         "The violin lessons start at nine", "Green is my favourite colour"]  # fmt: skip
QUERIES = ["green tea", "violin", "favourite drink tea", "Lisbon summer violin"]


def ranked(store, owner, query):
    with store.db.read() as conn:
        found = keyword_search(conn, owners=(owner,), query=query, now_iso=store.now())
    return [(memory.content, score) for memory, score in found]


@pytest.mark.sqlite_only
def test_a_small_key_is_ranked_as_fts5_would_rank_it_alone(store, monkeypatch):
    """Ranked here, from its own matches: the scores of FTS5's bm25 over a table that holds
    this key alone, whatever other keys hold."""
    for n, text in enumerate(SMALL):
        store.create(api_key_id="small", key=f"s{n}", content=text)
    monkeypatch.setattr(fts, "SMALL_KEY", 0)  # every key large: FTS5 ranks
    alone = {query: ranked(store, "small", query) for query in QUERIES}
    monkeypatch.undo()
    fts._sizes.clear()  # what SMALL_KEY 0 made of the key
    for n in range(40):  # another key, full of the same words
        store.create(api_key_id="big", key=f"b{n}", content=f"tea violin green drink {n}")
    for query in QUERIES:
        here = ranked(store, "small", query)
        assert [text for text, _ in here] == [text for text, _ in alone[query]], query
        assert [score for _, score in here] == pytest.approx([s for _, s in alone[query]])
    monkeypatch.setattr(fts, "SMALL_KEY", 0)
    beside = ranked(store, "small", "green tea")
    assert [s for _, s in beside] != pytest.approx([s for _, s in alone["green tea"]]), (
        "FTS5 counts the other key's matches"
    )


@pytest.mark.sqlite_only
def test_a_key_past_the_small_size_is_ranked_by_fts5(store, monkeypatch):
    monkeypatch.setattr(fts, "SMALL_KEY", 3)
    for n, text in enumerate(SMALL):
        store.create(api_key_id="small", key=f"s{n}", content=text)
    ranked_here = []
    monkeypatch.setattr(fts, "_ranked_here", lambda *args: ranked_here.append(args) or [])
    assert len(ranked(store, "small", "violin")) == 2
    assert ranked_here == [], "six memories: FTS5 ranks them"
