import threading

import pytest

from omniroute.core.clock import to_iso
from omniroute.core.text_rules import UnstorableText
from omniroute.memory.listing import list_page
from omniroute.memory.model import MemoryFilter
from omniroute.memory.search.fts import keyword_search
from omniroute.memory.store import KeyConflict, MemoryNotFound, MemoryStore
from tests.helpers import history, in_minutes

pytestmark = pytest.mark.both_stores


def search(store: MemoryStore, query: str, owner: str = "alice") -> list[str]:
    with store.db.read() as conn:
        hits = keyword_search(conn, owners=(owner,), query=query, now_iso=store.now())
    return [memory.content for memory, _ in hits]


# -- upsert -----------------------------------------------------------------------------


def test_create_makes_a_memory_with_its_fields(store):
    memory, created = store.create(
        api_key_id="alice",
        key="pref:tea",
        content="Likes green tea",
        type="factual",
        session_id="s1",
        metadata={"source": "api"},
    )
    assert created
    assert store.get(memory.id) == memory
    assert memory.created_at == memory.updated_at == "2026-01-15T12:00:00.000Z"
    assert (memory.access_count, memory.last_accessed_at, memory.expires_at) == (0, None, None)


def test_creating_the_same_key_again_updates_the_memory_and_merges_metadata(store, clock):
    first, _ = store.create(
        api_key_id="alice", key="k", content="old", metadata={"a": 1, "b": 1}, session_id="s1"
    )
    clock.advance(seconds=5)
    second, created = store.create(
        api_key_id="alice",
        key="k",
        content="new",
        type="episodic",
        metadata={"b": 2, "c": 3},
        session_id="s2",
    )
    assert not created
    assert second.id == first.id
    assert second.created_at == first.created_at
    assert second.updated_at > first.updated_at
    assert (second.content, second.type, second.session_id) == ("new", "episodic", "s2")
    assert second.metadata == {"a": 1, "b": 2, "c": 3}
    assert store.get(first.id) == second


def test_the_same_key_of_two_owners_makes_two_memories(store):
    a, _ = store.create(api_key_id="alice", key="k", content="alice's")
    b, created = store.create(api_key_id="bob", key="k", content="bob's")
    assert created and a.id != b.id


def test_an_upsert_keeps_the_access_telemetry(store):
    memory, _ = store.create(api_key_id="alice", key="k", content="v1")
    store.record_access({memory.id: 1})
    again, _ = store.create(api_key_id="alice", key="k", content="v2")
    assert again.access_count == 1 and again.last_accessed_at is not None


# -- expiry -----------------------------------------------------------------------------


def test_an_expired_memory_is_never_returned(store, clock):
    memory, _ = store.create(
        api_key_id="alice", key="k", content="short-lived fact", expires_at=in_minutes(clock, 1)
    )
    assert store.get(memory.id) is not None  # now also cached
    clock.advance(minutes=2)
    assert store.get(memory.id) is None
    assert list_page(store, MemoryFilter(api_key_id="alice")).total == 0
    assert search(store, "fact") == []
    with pytest.raises(MemoryNotFound):
        store.update(memory.id, content="revived?")


def test_creating_onto_an_expired_key_starts_a_new_memory(store, clock):
    old, _ = store.create(
        api_key_id="alice",
        key="k",
        content="old",
        metadata={"stale": True},
        expires_at=in_minutes(clock, 1),
    )
    clock.advance(minutes=2)
    new, created = store.create(api_key_id="alice", key="k", content="new", metadata={"x": 1})
    assert created and new.id != old.id
    assert new.metadata == {"x": 1}
    assert [entry[0] for entry in history(store, old.id)] == ["create", "delete"]


def test_an_expired_memory_can_still_be_deleted(store, clock):
    memory, _ = store.create(
        api_key_id="alice", key="k", content="x", expires_at=in_minutes(clock, 1)
    )
    clock.advance(minutes=2)
    assert store.delete(memory.id)


# -- keyword search ---------------------------------------------------------------------


def test_keyword_search_finds_a_memory_right_after_create(store):
    store.create(api_key_id="alice", key="pref:editor", content="Uses Neovim with Lua config")
    assert search(store, "neovim") == ["Uses Neovim with Lua config"]
    assert search(store, "editor") == ["Uses Neovim with Lua config"], "keys are searchable"


def test_keyword_search_follows_updates_and_deletes(store):
    memory, _ = store.create(api_key_id="alice", key="k", content="Drinks espresso")
    store.update(memory.id, content="Drinks matcha")
    assert search(store, "matcha") == ["Drinks matcha"]
    assert search(store, "espresso") == []
    store.create(api_key_id="alice", key="k", content="Drinks rooibos")
    assert search(store, "rooibos") == ["Drinks rooibos"]
    assert search(store, "matcha") == []
    store.delete(memory.id)
    assert search(store, "rooibos drinks") == []


def test_keyword_search_stays_within_one_owner(store):
    store.create(api_key_id="bob", key="k", content="Bob's secret project codename")
    assert search(store, "codename", owner="alice") == []
    assert search(store, "codename", owner="bob") == ["Bob's secret project codename"]


@pytest.mark.parametrize("other", ["alice-bob", "alice bob", "ALICE", "bob alice"])
def test_keyword_search_keeps_owners_apart_whose_ids_overlap(store, other):
    store.create(api_key_id=other, key="k", content="The launch codes")
    assert search(store, "launch codes", owner="alice") == []
    assert search(store, "launch codes", owner=other) == ["The launch codes"]


def test_the_keyword_index_stays_consistent_through_every_kind_of_write(store, database, clock):
    memory, _ = store.create(api_key_id="alice", key="a", content="one two")
    store.create(api_key_id="alice", key="a", content="three")
    store.update(memory.id, key="b", content="four")
    store.record_access({memory.id: 1})
    other, _ = store.create(
        api_key_id="bob", key="x", content="five", expires_at=in_minutes(clock, 1)
    )
    clock.advance(minutes=2)
    store.create(api_key_id="bob", key="x", content="six")
    store.delete(memory.id)
    if database.dialect == "sqlite":  # PostgreSQL's tsvector is a stored generated column
        with database.write() as conn:
            # rank = 1: also compare the index with the content of the memories table.
            conn.exec_driver_sql(
                "INSERT INTO memory_fts (memory_fts, rank) VALUES ('integrity-check', 1)"
            )
    for word in ("one", "two", "three", "five"):
        assert search(store, word) == [] and search(store, word, owner="bob") == []
    assert search(store, "four") == []
    assert search(store, "six", owner="bob") == ["six"]


def test_keyword_search_ranks_the_better_match_first(store):
    store.create(api_key_id="alice", key="a", content="Likes Python")
    store.create(api_key_id="alice", key="b", content="Writes Python and Rust, Rust mostly")
    assert search(store, "rust python")[0] == "Writes Python and Rust, Rust mostly"


def test_keyword_search_matches_accented_and_non_latin_words(store):
    store.create(api_key_id="alice", key="a", content="Wohnt in München")
    store.create(api_key_id="alice", key="b", content="好きな食べ物 寿司")
    assert search(store, "munchen") == ["Wohnt in München"]
    assert search(store, "寿司") == ["好きな食べ物 寿司"]


@pytest.mark.sqlite_only
def test_access_bumps_do_not_touch_the_keyword_index(store, database):
    memory, _ = store.create(api_key_id="alice", key="k", content="indexed once")
    with database.engine.connect() as conn:
        raw = conn.connection.dbapi_connection
        before = raw.total_changes
        raw.execute(
            "UPDATE memories SET access_count = access_count + 1 WHERE id = ?", (memory.id,)
        )
        assert raw.total_changes - before == 1, "an FTS trigger fired on an access bump"
        before = raw.total_changes
        raw.execute("UPDATE memories SET search_stems = 'chang' WHERE id = ?", (memory.id,))
        assert raw.total_changes - before > 1, "the FTS trigger did not fire on new stems"


# -- update and delete ------------------------------------------------------------------


def test_update_replaces_metadata_and_changes_only_what_is_given(store):
    memory, _ = store.create(api_key_id="alice", key="k", content="c", metadata={"a": 1})
    updated = store.update(memory.id, metadata={"b": 2})
    assert updated.metadata == {"b": 2}
    assert (updated.content, updated.key, updated.type) == ("c", "k", "factual")
    assert store.get(memory.id) == updated


def test_update_can_clear_the_expiry(store, clock):
    memory, _ = store.create(
        api_key_id="alice", key="k", content="c", expires_at=in_minutes(clock, 1)
    )
    store.update(memory.id, expires_at=None)
    clock.advance(minutes=5)
    assert store.get(memory.id) is not None


def test_update_to_a_key_the_owner_already_uses_is_a_conflict(store):
    store.create(api_key_id="alice", key="taken", content="a")
    memory, _ = store.create(api_key_id="alice", key="free", content="b")
    with pytest.raises(KeyConflict):
        store.update(memory.id, key="taken")
    assert store.get(memory.id).key == "free"


def test_update_may_take_the_key_of_an_expired_memory(store, clock):
    store.create(api_key_id="alice", key="taken", content="a", expires_at=in_minutes(clock, 1))
    memory, _ = store.create(api_key_id="alice", key="free", content="b")
    clock.advance(minutes=2)
    assert store.update(memory.id, key="taken").key == "taken"


def test_update_and_delete_of_unknown_ids(store):
    with pytest.raises(MemoryNotFound):
        store.update("no-such-id", content="x")
    assert store.delete("no-such-id") is False


def test_a_deleted_memory_is_gone(store):
    memory, _ = store.create(api_key_id="alice", key="k", content="c")
    store.get(memory.id)
    assert store.delete(memory.id)
    assert store.get(memory.id) is None


# -- list -------------------------------------------------------------------------------


@pytest.fixture
def populated(store, clock):
    rows = [
        ("alice", "factual", "s1", "k1", "Prefers 100% test coverage"),
        ("alice", "episodic", "s1", "k2", "Chose snake_case for the API"),
        ("alice", "factual", "s2", "k3", "Lives in ÄRHUS"),
        ("alice", "procedural", "s2", "k4", "Deploys with make release"),
        ("bob", "factual", "s1", "k1", "Bob likes snakecase"),
    ]
    for owner, type_, session, key, content in rows:
        clock.advance(seconds=1)
        store.create(api_key_id=owner, key=key, content=content, type=type_, session_id=session)
    return store


def contents(page) -> list[str]:
    return [memory.content for memory in page.data]


def test_list_is_newest_first_and_pages(populated):
    everything = list_page(populated, MemoryFilter(api_key_id="alice"))
    assert contents(everything) == [
        "Deploys with make release",
        "Lives in ÄRHUS",
        "Chose snake_case for the API",
        "Prefers 100% test coverage",
    ]
    second = list_page(populated, MemoryFilter(api_key_id="alice"), limit=2, offset=2)
    assert contents(second) == contents(everything)[2:]
    assert second.total == 4


def test_list_filters_by_type_and_session(populated):
    assert list_page(populated, MemoryFilter(api_key_id="alice", type="factual")).total == 2
    page = list_page(populated, MemoryFilter(api_key_id="alice", session_id="s2"))
    assert contents(page) == ["Deploys with make release", "Lives in ÄRHUS"]
    assert list_page(populated, MemoryFilter(session_id="s1")).total == 3


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("%", ["Prefers 100% test coverage"]),
        ("_", ["Chose snake_case for the API"]),
        ("snake_case", ["Chose snake_case for the API"]),
        ("ärhus", ["Lives in ÄRHUS"]),
        ("K4", ["Deploys with make release"]),
        ("nothing like this", []),
    ],
)
def test_text_filter_is_a_literal_case_insensitive_substring(populated, text, expected):
    assert contents(list_page(populated, MemoryFilter(api_key_id="alice", text=text))) == expected


def test_list_counts_cover_every_match_not_only_the_page(populated):
    page = list_page(populated, MemoryFilter(api_key_id="alice"), limit=1)
    assert len(page.data) == 1
    assert page.total == 4
    assert page.by_type == {"factual": 2, "episodic": 1, "procedural": 1}
    expected_tokens = sum(
        -(-len(c) // 4)
        for c in (
            "Prefers 100% test coverage",
            "Chose snake_case for the API",
            "Lives in ÄRHUS",
            "Deploys with make release",
        )
    )
    assert page.tokens_used == expected_tokens


def test_record_access_adds_the_counts(populated, clock):
    memory = list_page(populated, MemoryFilter(api_key_id="alice")).data[0]
    populated.get(memory.id)
    populated.record_access({memory.id: 2})
    populated.record_access({memory.id: 1})
    fresh = populated.get(memory.id)
    assert fresh.access_count == 3
    assert fresh.last_accessed_at == to_iso(clock())
    assert list_page(populated, MemoryFilter(api_key_id="alice")).accessed == 1


def test_get_is_served_from_the_cache_until_a_write(store):
    memory, _ = store.create(api_key_id="alice", key="k", content="v1")
    store.get(memory.id)
    store.get(memory.id)
    assert (store.cache_misses, store.cache_hits) == (1, 1)
    store.update(memory.id, content="v2")
    assert store.get(memory.id).content == "v2"


def test_concurrent_writers_lose_nothing(store):
    def writer(number: int) -> None:
        for item in range(40):
            # Half the writes upsert a key shared by every thread.
            key = "shared" if item % 2 else f"t{number}:{item}"
            store.create(api_key_id="alice", key=key, content=f"thread {number} item {item}")

    threads = [threading.Thread(target=writer, args=(number,)) for number in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    page = list_page(store, MemoryFilter(api_key_id="alice"), limit=200)
    assert page.total == 8 * 20 + 1
    shared = next(memory for memory in page.data if memory.key == "shared")
    assert len(store.history(shared.id)) >= 2


@pytest.mark.parametrize(
    ("fields", "field"),
    [
        ({"content": "a\u0000b"}, "content"),
        ({"key": "k\u0000"}, "key"),
        ({"session_id": "s\u0000"}, "session_id"),
        ({"metadata": {"deep": ["ok", "\ud800"]}}, "metadata.deep.1"),
    ],
)
def test_the_store_refuses_text_no_database_can_hold_naming_the_field(store, fields, field):
    values = {"api_key_id": "alice", "key": "k", "content": "fine", **fields}
    with pytest.raises(UnstorableText) as refused:
        store.create(**values)
    assert refused.value.field == field
    assert list_page(store, MemoryFilter()).total == 0


def test_many_creates_in_one_transaction_hold_no_lock_per_key(store, database):
    """An import writes thousands of memories in one transaction: on PostgreSQL a lock per
    key ran out of the server's lock slots ("out of shared memory") at about 20k."""
    with database.write() as conn:
        for number in range(200):
            store.create(api_key_id="alice", key=f"k{number}", content="v", connection=conn)
        if database.dialect == "postgresql":
            held = conn.exec_driver_sql(
                "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory'"
                " AND pid = pg_backend_pid()"
            ).scalar()
            assert held == 0
    assert list_page(store, MemoryFilter(api_key_id="alice")).total == 200


def test_create_many_writes_as_create_one_after_another_would(store):
    kept, _ = store.create(api_key_id="alice", key="pref:tea", content="Likes tea",
                           metadata={"source": "chat"})  # fmt: skip
    items = [
        {"api_key_id": "alice", "key": "pref:coffee", "content": "Likes coffee"},
        {"api_key_id": "alice", "key": "pref:tea", "content": "Likes green tea",
         "metadata": {"strength": "high"}},  # an existing key: updated, metadata merged
        {"api_key_id": "alice", "key": "pref:coffee", "content": "Likes black coffee"},
        {"api_key_id": "bob", "key": "pref:tea", "content": "Bob likes tea"},
    ]  # fmt: skip
    with store.db.write() as conn:
        written = store.create_many(items, conn)
    assert [created for _, created in written] == [True, False, False, True]
    assert written[1][0].id == kept.id and written[2][0].id == written[0][0].id
    tea = store.get(kept.id)
    assert tea.content == "Likes green tea" and tea.metadata == {"source": "chat",
                                                                 "strength": "high"}  # fmt: skip
    assert store.get(written[0][0].id).content == "Likes black coffee"
    assert [entry[0] for entry in history(store, written[0][0].id)] == ["create", "update"]
    assert [entry[0] for entry in history(store, written[3][0].id)] == ["create"]
    assert search(store, "coffee") == ["Likes black coffee"]


def test_create_many_checks_every_item_before_it_writes(store):
    items = [{"api_key_id": "alice", "key": "ok", "content": "fine"},
             {"api_key_id": "alice", "key": "bad", "content": "half \ud800 a pair"}]  # fmt: skip
    with pytest.raises(UnstorableText), store.db.write() as conn:
        store.create_many(items, conn)
    assert store.find(MemoryFilter(api_key_id="alice")) == []
