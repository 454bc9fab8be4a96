"""Runtime settings kept in the `settings` table as JSON values, read through a short cache."""

from __future__ import annotations

import json
import threading
from collections.abc import Mapping
from typing import Any

from cachetools import TTLCache
from sqlalchemy import select

from .clock import now_iso
from .db import Database
from .tables import settings

# Writes through this process clear the cache at once; other processes (the RQ worker) see a
# change after at most this many seconds. The reference cached forever, so the worker never did.
CACHE_TTL_SECONDS = 5.0


class SettingsStore:
    def __init__(self, database: Database) -> None:
        self.db = database
        self._cache: TTLCache[str, dict[str, Any]] = TTLCache(1, CACHE_TTL_SECONDS)
        self._lock = threading.Lock()
        # Bumped by every clear: a read that began before a write must not cache what it read
        # (a reader thread racing a PUT would otherwise keep the old values for the TTL).
        self._generation = 0

    def all(self) -> dict[str, Any]:
        """Every stored setting, key -> decoded JSON value (unparseable values are skipped)."""
        with self._lock:
            cached = self._cache.get("all")
            generation = self._generation
        if cached is not None:
            return dict(cached)
        with self.db.read() as conn:
            rows = conn.execute(select(settings.c.key, settings.c.value)).all()
        values = {}
        for key, raw in rows:
            try:
                values[key] = json.loads(raw)
            except ValueError:
                continue
        with self._lock:
            if generation == self._generation:
                self._cache["all"] = values
        return dict(values)

    def put(self, values: Mapping[str, Any]) -> None:
        """Write the given keys (others stay as they are) and clear the cache."""
        if not values:
            return
        now = now_iso()
        with self.db.write() as conn:
            for key, value in values.items():
                encoded = json.dumps(value, ensure_ascii=False, allow_nan=False)
                statement = self.db.insert(settings).values(key=key, value=encoded, updated_at=now)
                conn.execute(
                    statement.on_conflict_do_update(
                        index_elements=[settings.c.key],
                        set_={"value": statement.excluded.value, "updated_at": now},
                    )
                )
        self.clear_cache()

    def clear_cache(self) -> None:
        with self._lock:
            self._generation += 1
            self._cache.clear()
