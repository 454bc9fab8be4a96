"""The long-lived objects one app instance works with, built by the app factory."""

from __future__ import annotations

from dataclasses import dataclass

import httpx
import redis
from flask import Flask, current_app

from .db import Database
from .keys import ApiKeyStore
from .memory.access import AccessRecorder
from .memory.backfill import Backfill
from .memory.embedding.sources import EmbeddingSources
from .memory.rerank import Reranker
from .memory.retrieval import Retriever
from .memory.settings import MemorySettings
from .memory.store import MemoryStore
from .memory.vectors import VectorIndex
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
    vectors: VectorIndex
    embeddings: EmbeddingSources
    backfill: Backfill
    retriever: Retriever
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
        vectors = VectorIndex(app.config["MEMORY_VEC_QUANTIZATION"])
        memories = MemoryStore(database, vectors=vectors)
        memory_settings = MemorySettings(settings)
        providers = ProviderStore(database)
        # Redirects are never followed: each outbound URL is checked before it is used.
        http = httpx.Client(
            follow_redirects=False,
            timeout=httpx.Timeout(
                app.config["UPSTREAM_TIMEOUT_SECONDS"], connect=UPSTREAM_CONNECT_SECONDS
            ),
        )
        jobs = JobQueue(app, client)
        embeddings = EmbeddingSources(
            app.config, providers, http, on_static_missing=lambda: request_static_model(jobs)
        )
        reranker = Reranker(
            providers, http, allow_local=app.config["OMNIROUTE_ALLOW_LOCAL_PROVIDER_URLS"]
        )
        memories.on_write = lambda: request_backfill(jobs)
        return cls(
            db=database,
            memories=memories,
            access=AccessRecorder(memories),
            vectors=vectors,
            embeddings=embeddings,
            backfill=Backfill(memories, vectors, embeddings, memory_settings),
            retriever=Retriever(memories, vectors, embeddings, reranker),
            keys=ApiKeyStore(database),
            settings=settings,
            memory_settings=memory_settings,
            providers=providers,
            redis=client,
            jobs=jobs,
            http=http,
        )

    def request_backfill(self) -> None:
        """Start the embedding backfill in the background (folded if one already waits)."""
        request_backfill(self.jobs)

    def request_static_model(self) -> None:
        """Build the default static model in the background, then backfill with it."""
        request_static_model(self.jobs)

    def close(self) -> None:
        self.access.flush()
        self.jobs.shutdown()
        self.http.close()
        if self.redis is not None:
            self.redis.close()
        self.db.dispose()

    def install(self, app) -> None:
        app.extensions[_EXTENSION] = self


# The job functions import this module, so they are imported when first needed.
def request_backfill(jobs: JobQueue) -> None:
    from jobs import BACKFILL_JOB_ID, EMBEDDINGS_QUEUE
    from jobs.memory import backfill_vectors

    jobs.enqueue(EMBEDDINGS_QUEUE, backfill_vectors, unique_id=BACKFILL_JOB_ID)


def request_static_model(jobs: JobQueue) -> None:
    from jobs import EMBEDDINGS_QUEUE, STATIC_MODEL_JOB_ID
    from jobs.memory import build_static_model

    jobs.enqueue(EMBEDDINGS_QUEUE, build_static_model, unique_id=STATIC_MODEL_JOB_ID)


def services() -> Services:
    """The services of the current app."""
    return current_app.extensions[_EXTENSION]
