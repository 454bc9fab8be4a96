"""The retention sweep: expired, retention and decay deletions, batched and whole."""

from __future__ import annotations

import threading
from datetime import timedelta

import pytest
from sqlalchemy import func, select

from omniroute.core.clock import to_iso
from omniroute.core.db.settings_store import SettingsStore
from omniroute.core.db.tables import memories, memory_history
from omniroute.memory.life.decay import DecayPolicy
from omniroute.memory.life.sweep import RetentionSweep
from omniroute.memory.model import MemoryFilter
from omniroute.memory.settings import MemorySettings
from tests.helpers import backdate as age

pytestmark = pytest.mark.both_stores

DECAY = DecayPolicy(enabled=True, episodic_days=30, access_immunity=3)
NO_DECAY = DecayPolicy()


@pytest.fixture
def settings(database):
    return MemorySettings(SettingsStore(database))


def sweep(store, settings, decay=NO_DECAY, batch=200):
    return RetentionSweep(store, settings, decay, batch=batch).run()


def reasons(database):
    with database.read() as conn:
        rows = conn.execute(
            select(memory_history.c.new_key, memory_history.c.old_key, memory_history.c.reason)
            .where(memory_history.c.action == "delete")
            .order_by(memory_history.c.seq)
        )
        return {row.old_key: row.reason for row in rows}


def keys(store):
    with store.db.read() as conn:
        return sorted(conn.execute(select(memories.c.key)).scalars())


def test_expired_memories_go_with_a_history_row_each_and_live_ones_stay(store, settings, clock):
    store.create(
        api_key_id="a", key="soon", content="x", expires_at=to_iso(clock() + timedelta(minutes=1))
    )
    store.create(
        api_key_id="a", key="later", content="y", expires_at=to_iso(clock() + timedelta(days=1))
    )
    store.create(api_key_id="a", key="forever", content="z")
    clock.advance(minutes=2)
    report = sweep(store, settings)
    assert report.expired == 1 and report.batches == 1
    assert keys(store) == ["forever", "later"]
    assert reasons(store.db) == {"soon": "expired"}


def test_retention_deletes_only_when_switched_on_and_spares_what_was_injected_since(
    store, settings
):
    for key in ("old", "old-but-used", "old-used-long-ago", "young"):
        store.create(api_key_id="a", key=key, content=key)
    age(store, "old", 40)
    age(store, "old-but-used", 40, accessed_days=5, count=1)
    age(store, "old-used-long-ago", 40, accessed_days=35, count=1)
    age(store, "young", 10)
    report = sweep(store, settings)
    assert report.retention == 0 and "retentionSweep" in report.off[0]
    assert len(keys(store)) == 4
    settings.update({"retentionSweep": True, "retentionDays": 30})
    report = sweep(store, settings)
    assert report.retention == 2
    assert keys(store) == ["old-but-used", "young"]
    assert set(reasons(store.db).values()) == {"retention"}


def test_decay_deletes_old_episodic_memories_unless_immune(store, settings):
    store.create(api_key_id="a", key="decision-old", content="I chose Postgres", type="episodic")
    store.create(api_key_id="a", key="decision-immune", content="I chose Redis", type="episodic")
    store.create(api_key_id="a", key="decision-fresh", content="I use uv", type="episodic")
    store.create(api_key_id="a", key="fact-old", content="I like tea", type="factual")
    age(store, "decision-old", 31)
    age(store, "decision-immune", 31, accessed_days=31, count=3)
    age(store, "decision-fresh", 60, accessed_days=10, count=1)  # used recently: age from then
    age(store, "fact-old", 300)
    assert sweep(store, settings).decay == 0  # decay is off by default
    report = sweep(store, settings, DECAY)
    assert report.decay == 1
    assert keys(store) == ["decision-fresh", "decision-immune", "fact-old"]
    assert reasons(store.db) == {"decision-old": "decay"}


def test_the_sweep_works_in_batches_and_reports_the_longest(store, settings, clock):
    for number in range(7):
        store.create(
            api_key_id="a",
            key=f"k{number}",
            content="x",
            expires_at=to_iso(clock() + timedelta(seconds=1)),
        )
    clock.advance(minutes=1)
    report = sweep(store, settings, batch=3)
    assert report.expired == 7 and report.batches == 3
    assert report.longest_batch_ms > 0
    assert keys(store) == []


def test_a_sweep_under_concurrent_writes_loses_no_live_memory(store, settings, clock):
    for number in range(600):
        store.create(
            api_key_id="a",
            key=f"dead{number}",
            content="gone",
            expires_at=to_iso(clock() + timedelta(seconds=1)),
        )
    clock.advance(minutes=1)
    written = []

    def chat_traffic():
        for number in range(150):
            memory, _ = store.create(api_key_id="b", key=f"live{number}", content="kept")
            written.append(memory.id)

    writer = threading.Thread(target=chat_traffic)
    writer.start()
    report = sweep(store, settings, batch=50)
    writer.join()
    assert report.expired == 600
    live = store.find(MemoryFilter(api_key_id="b"), limit=1000)
    assert sorted(m.id for m in live) == sorted(written)
    with store.db.read() as conn:
        assert conn.execute(select(func.count()).select_from(memories)).scalar_one() == 150
