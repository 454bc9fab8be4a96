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
        keyword_search(conn, api_key_id="alice", query=query, now_iso=store.now())


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
        hits = keyword_search(conn, api_key_id="alice", query="NEAR", now_iso=store.now())
    assert len(hits) == 1


def test_stop_words_are_left_out_of_a_question():
    assert topic_words("What is my favourite editor?") == ["favourite", "editor"]
    assert topic_words("Wat is mijn favoriete editor?") == ["favoriete", "editor"]
    assert topic_words("Was ist mein Lieblingseditor?") == ["lieblingseditor"]


def test_a_question_of_stop_words_alone_searches_nothing():
    assert match_expression("what do you know about me?") is None


def search(store, query: str, limit: int = 100) -> list[str]:
    with store.db.read() as conn:
        hits = keyword_search(conn, api_key_id="alice", query=query, now_iso=store.now(),
                              limit=limit)  # fmt: skip
    return [memory.key for memory, _ in hits]


def test_matches_the_filters_drop_from_the_pool_are_made_up_for(store, monkeypatch):
    monkeypatch.setattr(fts, "POOL_FACTOR", 1)
    store.create(api_key_id="alice", key="kept", content="tea, once")
    for n in range(2):  # the best matches: more tea, but expired
        store.create(api_key_id="alice", key=f"gone{n}", content="tea tea tea tea",
                     expires_at="2000-01-01T00:00:00.000Z")  # fmt: skip
    assert search(store, "tea", limit=2) == ["kept"]
