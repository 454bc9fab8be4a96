"""Large keys' keyword search from a Tantivy index in RAM, on both stores: the store's matches,
caught up from every writer's changes (another process's too), built again when the log no
longer reaches it, dropped when the key shrinks, and never for small keys or past the RAM
bound; through the retriever, deleted and expired memories never come back."""

from __future__ import annotations

import subprocess
import sys

import pytest

from omniroute.memory.search import change_log
from omniroute.memory.search.fts import keyword_search
from omniroute.memory.search.keyword_cache import KeywordCache
from omniroute.memory.search.query_words import topic_words
from omniroute.memory.search.retrieval import Retriever
from omniroute.memory.search.stemming import query_stems
from omniroute.memory.search.vectors import SqliteVecIndex
from omniroute.memory.settings import MemoryConfig
from tests.helpers import eventually

pytestmark = pytest.mark.both_stores

TOPICS = ["tea", "coffee", "bicycle", "garden", "violin", "lisbon", "harbour", "novel"]


def changes_of(database):
    return change_log.change_log(database.dialect, "memory_changes")


@pytest.fixture
def cache(store):
    made = KeywordCache(store.db.read, changes_of(store.db), min_memories=20, max_bytes=2**24)
    yield made
    made.close()


@pytest.fixture
def big(store):
    """A key of 40 memories (two topics each) beside a key of 3."""
    with store.db.write() as conn:
        for n in range(40):
            content = f"I like {TOPICS[n % 8]} and {TOPICS[(n * 3 + 1) % 8]}, note {n}"
            store.create(api_key_id="big", key=f"k{n}", content=content, connection=conn)
        for n in range(3):
            store.create(api_key_id="s", key=f"k{n}", content=f"{TOPICS[n]}", connection=conn)
    return "big"


def searched(cache, owner="big", query="violin garden", limit=100):
    return cache.search(owner, query_stems(topic_words(query)), limit)


def built(cache, owner="big"):
    """The key's hits once the search that starts its build is done."""
    searched(cache, owner)
    cache.wait()
    return searched(cache, owner)


def stored(store, owner="big", query="violin garden"):
    """The store's own matches (FTS5 or tsvector), as memories."""
    with store.db.read() as conn:
        found = keyword_search(conn, owners=(owner,), query=query, now_iso=store.now())
    return [memory for memory, _ in found]


def ids(store, hits) -> list[str | None]:
    """The ids of the hits' memories, in the hits' order (None for a seq with no row)."""
    with store.db.read() as conn:
        by_seq = dict(conn.exec_driver_sql("SELECT seq, id FROM memories").all())
    return [by_seq.get(seq) for seq, _ in hits or []]


def test_a_large_key_finds_what_the_store_finds(store, cache, big):
    assert searched(cache) is None, "the store answers while the index is built"
    built(cache)
    scored = searched(cache, query="coffee violin")
    hits = ids(store, scored)
    assert set(hits) == {m.id for m in stored(store, query="coffee violin")}
    both = {m.id for m in stored(store, query="coffee violin") if "coffee and violin" in m.content}
    assert len(both) == 5 and set(hits[:5]) == both, "the memories with both words first"
    assert all(score > 0 for _, score in scored)


def test_a_small_key_stays_with_the_store(store, cache, big):
    assert built(cache, "s") is None
    assert "s" not in cache._held


WRITER = """
import sys
from omniroute.core.db import Database
from omniroute.memory.store import MemoryStore

store = MemoryStore(Database(sys.argv[1]))
store.create(api_key_id="big", key="new", content="I play the accordion")
store.delete(sys.argv[2])
store.db.dispose()
"""


def test_another_processes_writes_are_caught_up(store, cache, big):
    built(cache)
    gone = stored(store, query="violin")[0]
    url = store.db.engine.url.render_as_string(hide_password=False)
    subprocess.run([sys.executable, "-c", WRITER, url, gone.id], check=True, timeout=120)
    assert eventually(lambda: len(ids(store, searched(cache, query="accordion"))) == 1)
    assert None not in ids(store, searched(cache, query="violin")), "the deleted one is gone"
    assert set(ids(store, searched(cache, query="violin accordion"))) == {
        memory.id for memory in stored(store, query="violin accordion")
    }


def test_an_index_the_log_no_longer_reaches_is_built_again(store, cache, big, monkeypatch):
    first = built(cache)
    if store.db.dialect == "postgresql":
        monkeypatch.setattr(change_log, "TRUSTED_SECONDS", 0)  # as if it had slept a day
    store.create(api_key_id="big", key="new", content="I play the accordion")
    store.create(api_key_id="big", key="newer", content="I play the drums")
    if store.db.dialect == "sqlite":  # the trigger prunes the older of the two unseen changes
        with store.db.write() as conn:
            conn.exec_driver_sql(
                "DELETE FROM memory_changes WHERE id < (SELECT max(id) FROM memory_changes)"
            )
    held = cache._held["big"]
    cache.catch_up()  # the committer's step, here at once
    assert "big" not in cache._held or cache._held["big"] is not held
    monkeypatch.undo()
    cache.wait()
    assert cache._held["big"] is not held
    assert len(ids(store, searched(cache, query="accordion"))) == 1
    assert set(ids(store, searched(cache))) == set(ids(store, first))


def test_a_key_that_shrinks_below_the_size_goes_back_to_the_store(store, cache, big):
    built(cache)
    for memory in stored(store, query=" ".join(TOPICS))[:30]:
        store.delete(memory.id)
    cache.catch_up()
    assert "big" not in cache._held
    assert searched(cache) is None


def test_past_the_ram_bound_a_key_stays_with_the_store(store, big):
    small = KeywordCache(store.db.read, changes_of(store.db), min_memories=20, max_bytes=100)
    try:
        assert built(small) is None and small._held == {}
    finally:
        small.close()


def test_through_the_retriever_deleted_and_expired_memories_never_come_back(store, cache, big):
    retriever = Retriever(store, vector_index(store.db), None, keywords=cache)
    settings = MemoryConfig.from_stored({})

    def ranked(query, **more):
        ranking = retriever.rank(
            api_key_id="big", query=query, settings=settings, strategy="keyword", **more
        )
        return [item.memory for item in ranking.items]

    try:
        built(cache)
        violin = ranked("violin")
        assert {m.id for m in violin} == {m.id for m in stored(store, query="violin")}
        store.delete(violin[0].id)
        store.update(violin[1].id, expires_at="2000-01-01T00:00:00.000Z")
        assert not {violin[0].id, violin[1].id} & {m.id for m in ranked("violin")}, (
            "at once, before the index has caught up"
        )
        session, _ = store.create(api_key_id="big", key="s", content="violin", session_id="one")
        other, _ = store.create(api_key_id="big", key="t", content="violin", session_id="two")
        # A session sees its own memories and those of no session, never another session's.
        assert eventually(lambda: session.id in {m.id for m in ranked("violin", session_id="one")})
        seen = ranked("violin", session_id="one")
        assert other.id not in {m.id for m in seen}
        assert {m.session_id for m in seen} == {"one", ""}
        held = ids(store, cache._held["big"].search(["violin"], 100, "one"))
        assert session.id in held and other.id not in held
    finally:
        retriever.close()


def vector_index(database):
    if database.dialect == "postgresql":
        from omniroute.memory.search.pgvector import PgVectorIndex

        return PgVectorIndex()
    return SqliteVecIndex()


def test_postgresql_changes_older_than_a_day_are_pruned(store, big):
    if store.db.dialect != "postgresql":
        pytest.skip("on SQLite a trigger keeps the newest 100,000 changes")
    count = "SELECT count(*) FROM memory_changes"
    with store.db.write() as conn:
        before = conn.exec_driver_sql(count).scalar()
        conn.exec_driver_sql(
            "UPDATE memory_changes SET changed_at = now() - interval '25 hours' WHERE id IN "
            "(SELECT id FROM memory_changes ORDER BY id LIMIT 10)"
        )
        assert change_log.prune(conn) == 10
        assert conn.exec_driver_sql(count).scalar() == before - 10


def test_another_keys_writes_leave_an_index_as_it_is(store, cache, big, monkeypatch):
    built(cache)
    commits = []
    index = cache._held["big"]
    monkeypatch.setattr(index, "commit", lambda: commits.append(1))
    for n in range(5):
        store.create(api_key_id="s", key=f"more{n}", content="violin lessons")
    store.delete(stored(store, owner="s", query="violin")[0].id)
    cache.catch_up()
    assert commits == [], "nothing of the large key changed"
    store.create(api_key_id="big", key="more", content="violin lessons")
    cache.catch_up()
    assert commits == [1]
