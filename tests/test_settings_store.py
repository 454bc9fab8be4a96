"""The settings store's cache: a write is seen at once, even by a read it overtook."""

from __future__ import annotations

from contextlib import contextmanager

import pytest

from omniroute.core.db.settings_store import SettingsStore

pytestmark = pytest.mark.both_stores


def test_a_read_that_a_write_overtakes_does_not_cache_the_old_values(database, monkeypatch):
    store = SettingsStore(database)
    store.put({"qdrantEnabled": False})
    real_read = database.read

    @contextmanager
    def read_then_write():
        with real_read() as conn:
            yield conn
        # Another thread's PUT commits and clears the cache after this read, before it caches.
        monkeypatch.setattr(database, "read", real_read)
        store.put({"qdrantEnabled": True})

    monkeypatch.setattr(database, "read", read_then_write)
    assert store.all()["qdrantEnabled"] is False  # what it read, before the write
    assert store.all()["qdrantEnabled"] is True  # not the stale value for 5 s
