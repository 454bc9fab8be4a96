"""The long-lived objects one app instance works with, built by the app factory."""

from __future__ import annotations

from dataclasses import dataclass

import redis
from flask import current_app

from .db import Database
from .keys import ApiKeyStore
from .memory.settings import MemorySettings
from .memory.store import MemoryStore
from .settings_store import SettingsStore

_EXTENSION = "omniroute"


@dataclass
class Services:
    db: Database
    memories: MemoryStore
    keys: ApiKeyStore
    settings: SettingsStore
    memory_settings: MemorySettings
    redis: redis.Redis | None

    @classmethod
    def build(cls, database: Database, redis_url: str | None) -> Services:
        settings = SettingsStore(database)
        client = None
        if redis_url:
            # from_url connects lazily: a Redis that is down does not stop the app starting.
            client = redis.Redis.from_url(redis_url, socket_connect_timeout=2, socket_timeout=5)
        return cls(
            db=database,
            memories=MemoryStore(database),
            keys=ApiKeyStore(database),
            settings=settings,
            memory_settings=MemorySettings(settings),
            redis=client,
        )

    def close(self) -> None:
        if self.redis is not None:
            self.redis.close()
        self.db.dispose()

    def install(self, app) -> None:
        app.extensions[_EXTENSION] = self


def services() -> Services:
    """The services of the current app."""
    return current_app.extensions[_EXTENSION]
