"""Runtime settings kept in the `settings` table as JSON values, read through a short cache."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from sqlalchemy import select

from omniroute.core.clock import now_iso
from omniroute.core.db import Database
from omniroute.core.db.read_cache import ReadCache
from omniroute.core.db.tables import settings


class SettingsStore:
    """Read through a ReadCache: other processes (the RQ worker) see a change within its TTL.
    The reference cached forever, so its worker never did."""

    def __init__(self, database: Database) -> None:
        self.db = database
        self._cache: ReadCache[dict[str, Any]] = ReadCache(1)

    def all(self) -> dict[str, Any]:
        """Every stored setting, key -> decoded JSON value (unparseable values are skipped)."""
        return dict(self._cache.get("all", self._read))

    def _read(self) -> dict[str, Any]:
        with self.db.read() as conn:
            rows = conn.execute(select(settings.c.key, settings.c.value)).all()
        values = {}
        for key, raw in rows:
            try:
                values[key] = json.loads(raw)
            except ValueError:
                continue
        return values

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
        self._cache.clear()
