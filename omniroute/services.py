"""The long-lived objects one app instance works with, built by the app factory."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta
from http.cookiejar import CookieJar, DefaultCookiePolicy
from pathlib import Path
from typing import Any

import httpx
import redis
from flask import Flask, current_app

from omniroute.core.activity import ActivityLog
from omniroute.core.admin_sessions import AdminSessionStore
from omniroute.core.brake import GuessBrake
from omniroute.core.clock import to_iso
from omniroute.core.db import Database
from omniroute.core.db.settings_store import SettingsStore
from omniroute.core.keys import ApiKeyStore
from omniroute.core.net import tls_context
from omniroute.core.providers.client import ProviderClient
from omniroute.core.providers.registry import ProviderStore
from omniroute.core.sealed import SecretBox
from omniroute.jobs import QUEUES, request_backfill, request_model_build, request_qdrant_sync
from omniroute.jobs.periodic.runner import run_job
from omniroute.jobs.periodic.runs import PeriodicRuns
from omniroute.jobs.periodic.schedule import PERIODIC_JOBS
from omniroute.jobs.periodic.scheduler import Scheduler
from omniroute.jobs.queue import JobQueue
from omniroute.memory.access import AccessRecorder
from omniroute.memory.backends.local import LOCAL_ALIASES, LocalBackend
from omniroute.memory.backends.manager import MemoryManager
from omniroute.memory.backends.serving import ServingMemories
from omniroute.memory.backends.setup import BackendSetup
from omniroute.memory.embedding.shared_models import SharedModels
from omniroute.memory.embedding.sources import EmbeddingSources
from omniroute.memory.engine_status import engine_status
from omniroute.memory.extraction.outbox import ExtractionOutbox
from omniroute.memory.life.backfill import Backfill
from omniroute.memory.life.decay import DecayPolicy
from omniroute.memory.life.summarize import Summarizer
from omniroute.memory.life.summary_text import LlmWriter
from omniroute.memory.life.sweep import RetentionSweep
from omniroute.memory.qdrant.config import QdrantSettings
from omniroute.memory.qdrant.connection import QdrantConnection
from omniroute.memory.qdrant.index import QdrantIndex
from omniroute.memory.qdrant.outbox import QdrantOutbox
from omniroute.memory.qdrant.sync import QdrantSync
from omniroute.memory.qdrant.tier import QdrantTier
from omniroute.memory.search.change_log import change_log
from omniroute.memory.search.fusion import RetrievalOptions
from omniroute.memory.search.keyword_cache import KeywordCache
from omniroute.memory.search.pgvector import PgVectorIndex
from omniroute.memory.search.rerank import Reranker
from omniroute.memory.search.retrieval import Retriever
from omniroute.memory.search.vector_cache import VectorCache
from omniroute.memory.search.vectors import SqliteVecIndex, VectorIndex
from omniroute.memory.settings import MemorySettings
from omniroute.memory.store import MemoryStore

_EXTENSION = "omniroute"
UPSTREAM_CONNECT_SECONDS = 10.0
UPSTREAM_KEEPALIVE_CONNECTIONS = 100


@dataclass
class Services:
    db: Database
    memories: MemoryStore
    outbox: ExtractionOutbox
    access: AccessRecorder
    vectors: VectorIndex
    embeddings: EmbeddingSources
    shared_models: SharedModels
    backfill: Backfill
    retriever: Retriever
    qdrant: QdrantTier
    keys: ApiKeyStore
    admin_sessions: AdminSessionStore
    guess_brake: GuessBrake
    settings: SettingsStore
    memory_settings: MemorySettings
    providers: ProviderStore
    provider_client: ProviderClient
    redis: redis.Redis | None
    jobs: JobQueue
    http: httpx.Client
    periodic_runs: PeriodicRuns
    retention_sweep: RetentionSweep
    summarizer: Summarizer
    scheduler: Scheduler
    activity: ActivityLog
    backends: BackendSetup
    serving: ServingMemories

    @classmethod
    def build(cls, app: Flask, database: Database) -> Services:
        """Every part, each given what it needs when it is made (the core gets callbacks)."""
        config = app.config
        client = None
        if config["REDIS_URL"]:
            # from_url connects lazily: a Redis that is down does not stop the app starting.
            client = redis.Redis.from_url(
                config["REDIS_URL"], socket_connect_timeout=2, socket_timeout=5
            )
        jobs = JobQueue(app, client, QUEUES)
        settings = SettingsStore(database)
        memory_settings = MemorySettings(settings)
        box = SecretBox(config["SECRET_KEY"])
        providers = ProviderStore(database, settings, box)
        qdrant_settings = QdrantSettings(settings, box, config)
        qdrant_outbox = QdrantOutbox(database, enabled=qdrant_settings.enabled)
        # Redirects are never followed: each outbound URL is checked before it is used. No
        # cookie is kept: the clients are shared by every key, and a provider's cookie (a CDN's
        # session) must not ride along with another key's requests.
        outbound = {
            "verify": tls_context(),
            "follow_redirects": False,
            "cookies": CookieJar(DefaultCookiePolicy(allowed_domains=[])),
            "timeout": httpx.Timeout(
                config["UPSTREAM_TIMEOUT_SECONDS"], connect=UPSTREAM_CONNECT_SECONDS
            ),
        }
        http = httpx.Client(**outbound)
        # Relayed chats: one connection per open stream, as many as a process may hold.
        async_http = httpx.AsyncClient(
            **outbound,
            limits=httpx.Limits(
                max_connections=config["MAX_OPEN_STREAMS"],
                max_keepalive_connections=UPSTREAM_KEEPALIVE_CONNECTIONS,
            ),
        )
        provider_client = ProviderClient(
            http,
            allow_local=config["OMNIROUTE_ALLOW_LOCAL_PROVIDER_URLS"],
            async_http=async_http,
        )
        vector_cache = VectorCache(
            database.read,
            min_vectors=config["MEMORY_VEC_CACHE_MIN_VECTORS"],
            max_bytes=config["MEMORY_VEC_CACHE_MB"] * 2**20,
            graph_min_vectors=config["MEMORY_VEC_GRAPH_MIN_VECTORS"],
            folder=Path(config["DATA_DIR"]) / "vector_graphs",
        )
        keywords = KeywordCache(
            database.read,
            change_log(database.dialect, "memory_changes"),
            min_memories=config["MEMORY_KEYWORD_INDEX_MIN_MEMORIES"],
            max_bytes=config["MEMORY_KEYWORD_INDEX_MB"] * 2**20,
        )
        vectors: VectorIndex = (
            PgVectorIndex(cache=vector_cache)
            if database.dialect == "postgresql"
            else SqliteVecIndex(config["MEMORY_VEC_QUANTIZATION"], cache=vector_cache)
        )
        shared_models = SharedModels(database)
        activity = ActivityLog(database)

        def after_write() -> None:
            request_backfill(jobs)
            if qdrant_settings.enabled():
                request_qdrant_sync(jobs, qdrant_settings)

        memories = MemoryStore(
            database, vectors=vectors, on_write=after_write, mirror=qdrant_outbox
        )
        embeddings = EmbeddingSources(
            config,
            providers,
            provider_client,
            on_model_missing=lambda kind: request_model_build(jobs, kind),
            shared=shared_models,
        )
        # `backends` is made below; facts ask it at each run where the primary is.
        outbox = ExtractionOutbox(memories, remote_writer=lambda: backends.remote_writer())
        qdrant = QdrantTier(
            QdrantSync(
                memories,
                qdrant_outbox,
                QdrantIndex(
                    QdrantConnection(
                        allow_local=config["OMNIROUTE_ALLOW_LOCAL_PROVIDER_URLS"],
                        search_timeout=config["QDRANT_TIMEOUT_MS"] / 1000,
                    )
                ),
                qdrant_settings,
                memory_settings,
                embeddings,
                settings,
                local=vectors,
            ),
            retry_seconds=config["QDRANT_RETRY_SECONDS"],
        )
        periodic_runs = PeriodicRuns(database)
        options = RetrievalOptions(
            top_k=config["MEMORY_VEC_TOP_K"],
            fusion=config["MEMORY_FUSION"],
            rrf_k=config["MEMORY_RRF_K"],
            blend_weight=config["MEMORY_BLEND_KEYWORD_WEIGHT"],
            relevance_floor=config["MEMORY_RELEVANCE_FLOOR"],
            decay=DecayPolicy.from_config(config),
        )
        retriever = Retriever(
            memories,
            vectors,
            embeddings,
            Reranker(providers, provider_client),
            options,
            qdrant=qdrant,
            keywords=keywords,
        )
        backends = BackendSetup(
            MemoryManager(LocalBackend(memories, retriever, memory_settings), LOCAL_ALIASES),
            memory_settings,
            box,
            http,
            allow_local=config["OMNIROUTE_ALLOW_LOCAL_PROVIDER_URLS"],
            env=config,
        )
        scheduler = Scheduler(
            app,
            periodic_runs,
            [(job.id, job.interval(config)) for job in _thread_jobs(config)],
            lambda job_id: run_job(periodic_runs, config, job_id),
            lock_dir=config["DATA_DIR"],
            not_at_start=[job.id for job in PERIODIC_JOBS if not job.at_start],
        )
        return cls(
            db=database,
            memories=memories,
            outbox=outbox,
            access=AccessRecorder(memories),
            vectors=vectors,
            embeddings=embeddings,
            shared_models=shared_models,
            backfill=Backfill(memories, vectors, embeddings, memory_settings),
            retriever=retriever,
            qdrant=qdrant,
            keys=ApiKeyStore(database),
            admin_sessions=AdminSessionStore(database),
            guess_brake=GuessBrake(),
            settings=settings,
            memory_settings=memory_settings,
            providers=providers,
            provider_client=provider_client,
            redis=client,
            jobs=jobs,
            http=http,
            periodic_runs=periodic_runs,
            retention_sweep=RetentionSweep(memories, memory_settings, options.decay),
            summarizer=Summarizer(
                memories,
                memory_settings,
                LlmWriter(providers, provider_client),
                on_saved=lambda tokens: activity.add("tokens_saved", tokens),
            ),
            scheduler=scheduler,
            activity=activity,
            backends=backends,
            serving=ServingMemories(backends, memories),
        )

    def engine_report(self) -> dict[str, Any]:
        """The engine's status with the job queue's beside it (engine-status, the studio)."""
        settings = self.memory_settings.get()
        report = engine_status(self.retriever, self.backfill, settings)
        report["qdrant"] = self.qdrant.status(settings)
        report["jobs"] = {**self.jobs.status(), "extractionOutbox": self.outbox.pending()}
        return report

    def periodic_report(self) -> dict[str, Any]:
        """Each periodic job with its interval and last run (`flask jobs list`, the studio)."""
        config = current_app.config
        records = self.periodic_runs.all()
        now = self.periodic_runs.clock()
        jobs = []
        for job in PERIODIC_JOBS:
            record = records.get(job.id, {})
            interval = job.interval(config)
            started = record.get("started_at")
            jobs.append(
                {
                    "id": job.id,
                    "description": job.description,
                    "intervalSeconds": interval,
                    "status": record.get("status"),
                    "lastStartedAt": started,
                    "lastFinishedAt": record.get("finished_at"),
                    "durationMs": record.get("duration_ms"),
                    "result": record.get("result"),
                    "error": record.get("error"),
                    "runs": record.get("runs", 0),
                    "failures": record.get("failures", 0),
                    # a job that first runs one interval after the start has no record
                    # until then: not overdue for lack of one
                    "overdue": (started is None and job.at_start)
                    or (
                        started is not None
                        and started < to_iso(now - timedelta(seconds=2 * interval))
                    ),
                }
            )
        return {"scheduler": self._scheduler_mode(config), "jobs": jobs}

    def _scheduler_mode(self, config) -> str:
        if config["REDIS_URL"] and config["SCHEDULER"] == "auto":
            return "clock process (rq cron omniroute.jobs.cron) on Redis"
        if config["SCHEDULER"] == "off":
            return "off: only the clock process or `flask jobs run`"
        return "a thread of the web process (one per data dir)"

    def close(self) -> None:
        self.scheduler.stop()
        self.access.close()
        self.jobs.shutdown()
        self.activity.close()  # after the jobs, which count what they did
        self.backends.manager.shutdown()
        self.retriever.close()
        if self.retriever.keywords is not None:
            self.retriever.keywords.close()
        if self.vectors.cache is not None:
            self.vectors.cache.close()
        self.qdrant.sync.index.connection.close()
        self.http.close()
        if self.redis is not None:
            self.redis.close()
        self.db.dispose()

    def install(self, app) -> None:
        app.extensions[_EXTENSION] = self


def _thread_jobs(config) -> list:
    """The periodic jobs this process's scheduler thread triggers (the SCHEDULER setting)."""
    mode = config["SCHEDULER"]
    if mode == "off":
        return []
    if mode == "auto" and config["REDIS_URL"]:  # the clock process triggers the rest
        return [job for job in PERIODIC_JOBS if job.everywhere]
    return list(PERIODIC_JOBS)


def services() -> Services:
    """The services of the current app."""
    return current_app.extensions[_EXTENSION]
