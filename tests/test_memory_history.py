"""Clearing many memories at once, and the audit trail every write leaves."""

import pytest

from omniroute.memory.life.bulk import clear
from omniroute.memory.model import MemoryFilter
from tests.helpers import history, in_minutes

pytestmark = pytest.mark.both_stores


def test_clear_deletes_every_match_whatever_the_order(store, clock):
    for number in range(3):
        store.create(api_key_id="alice", key=f"old{number}", content="old")
    store.create(api_key_id="alice", key="old-note", content="old", type="procedural")
    store.create(api_key_id="bob", key="old", content="bob's old")
    clock.advance(days=1)
    cutoff = store.now()
    for number in range(7):
        store.create(api_key_id="alice", key=f"new{number}", content="new")
    doomed = MemoryFilter(api_key_id="alice", type="factual", created_before=cutoff)
    assert clear(store, doomed, batch=2) == 3
    left = {m.key for m in store.find(MemoryFilter(), limit=100)}
    assert left == {"old-note", "old", *(f"new{number}" for number in range(7))}
    assert clear(store, doomed) == 0


def test_clear_leaves_history_and_takes_expired_rows_too(store, clock):
    live, _ = store.create(api_key_id="alice", key="k", content="x")
    expired, _ = store.create(
        api_key_id="alice", key="gone", content="y", expires_at=in_minutes(clock, 1)
    )
    clock.advance(minutes=2)
    assert clear(store, MemoryFilter(api_key_id="alice")) == 2
    assert [entry[0] for entry in history(store, live.id)] == ["create", "delete"]
    assert [entry[0] for entry in history(store, expired.id)] == ["create", "delete"]
    with store.db.read() as conn:
        assert conn.exec_driver_sql("SELECT count(*) FROM memories").scalar_one() == 0


def test_every_create_update_and_delete_leaves_a_history_row(store):
    memory, _ = store.create(api_key_id="alice", key="k", content="one")
    store.update(memory.id, content="two", type="episodic")
    store.create(api_key_id="alice", key="k", content="three", type="episodic")
    store.delete(memory.id)
    assert history(store, memory.id) == [
        ("create", None, "one", None, "factual"),
        ("update", "one", "two", "factual", "episodic"),
        ("update", "two", "three", "episodic", "episodic"),
        ("delete", "three", None, "episodic", None),
    ]
    assert {row["api_key_id"] for row in store.history(memory.id)} == {"alice"}


def test_repeating_the_same_fact_adds_no_history_row(store):
    memory, _ = store.create(api_key_id="alice", key="k", content="same")
    store.create(api_key_id="alice", key="k", content="same")
    assert len(store.history(memory.id)) == 1
