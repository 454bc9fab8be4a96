"""The long-lived objects one app instance works with, built by the app factory."""

from __future__ import annotations

from dataclasses import dataclass

import httpx
import redis
from flask import Flask, current_app

from .db import Database
from .keys import ApiKeyStore
from .memory.access import AccessRecorder
from .memory.settings import MemorySettings
from .memory.store import MemoryStore
from .proxy.providers import ProviderStore
from .queue import JobQueue
from .settings_store import SettingsStore

_EXTENSION = "omniroute"
UPSTREAM_CONNECT_SECONDS = 10.0


@dataclass
class Services:
    db: Database
    memories: MemoryStore
    access: AccessRecorder
    keys: ApiKeyStore
    settings: SettingsStore
    memory_settings: MemorySettings
    providers: ProviderStore
    redis: redis.Redis | None
    jobs: JobQueue
    http: httpx.Client

    @classmethod
    def build(cls, app: Flask, database: Database) -> Services:
        redis_url = app.config["REDIS_URL"]
        settings = SettingsStore(database)
        client = None
        if redis_url:
            # from_url connects lazily: a Redis that is down does not stop the app starting.
            client = redis.Redis.from_url(redis_url, socket_connect_timeout=2, socket_timeout=5)
        memories = MemoryStore(database)
        return cls(
            db=database,
            memories=memories,
            access=AccessRecorder(memories),
            keys=ApiKeyStore(database),
            settings=settings,
            memory_settings=MemorySettings(settings),
            providers=ProviderStore(database),
            redis=client,
            jobs=JobQueue(app, client),
            # Redirects are never followed: each outbound URL is checked before it is used.
            http=httpx.Client(
                follow_redirects=False,
                timeout=httpx.Timeout(
                    app.config["UPSTREAM_TIMEOUT_SECONDS"], connect=UPSTREAM_CONNECT_SECONDS
                ),
            ),
        )

    def close(self) -> None:
        self.access.flush()
        self.jobs.shutdown()
        self.http.close()
        if self.redis is not None:
            self.redis.close()
        self.db.dispose()

    def install(self, app) -> None:
        app.extensions[_EXTENSION] = self


def services() -> Services:
    """The services of the current app."""
    return current_app.extensions[_EXTENSION]
