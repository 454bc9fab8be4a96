"""The gateway's Prometheus metrics: what it serves, retrieves, injects, runs and fails at.

With `PROMETHEUS_MULTIPROC_DIR` set (prometheus-client's multiprocess mode: several web
threads' and processes' counters in one folder, emptied before the processes start) the
exposition sums every process's files; otherwise it is this process's registry.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any, TypeVar

from prometheus_client import (
    CONTENT_TYPE_LATEST,
    REGISTRY,
    CollectorRegistry,
    Counter,
    Gauge,
    Histogram,
    generate_latest,
    multiprocess,
)

F = TypeVar("F", bound=Callable[..., Any])

HTTP_REQUESTS = Counter(
    "omniroute_http_requests", "HTTP requests answered, by route, method and status.",
    ["route", "method", "status"],
)  # fmt: skip
HTTP_LATENCY = Histogram(
    "omniroute_http_request_duration_seconds",
    "Time to the response's headers (a stream's first byte), by route and method.",
    ["route", "method"],
)
RETRIEVAL_LATENCY = Histogram(
    "omniroute_memory_retrieval_duration_seconds",
    "Retrieval for a chat request, by the strategy used and whether a tier fell back.",
    ["strategy", "fallback"],
    buckets=(0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5),
)
MEMORIES_INJECTED = Counter("omniroute_memories_injected", "Memories injected into prompts.")
JOBS = Counter(
    "omniroute_jobs", "Background and periodic jobs run, by job and outcome.", ["job", "outcome"]
)
UPSTREAM_ERRORS = Counter(
    "omniroute_upstream_errors", "Provider answers that were errors, by provider and status.",
    ["provider", "status"],
)  # fmt: skip
BACKEND_SYNC = Counter(
    "omniroute_backend_sync", "Updates and deletes sent on to fallback memory backends, by "
    "backend, operation and outcome.", ["backend", "operation", "outcome"],
)  # fmt: skip
FOREIGN_MEMORIES = Counter(
    "omniroute_backend_foreign_memories", "Memories a backend answered for one key that belonged "
    "to another, dropped before any route saw them, by backend.", ["backend"],
)  # fmt: skip
OPEN_STREAMS = Gauge(
    "omniroute_open_streams", "Chats (streamed or not) being relayed to their providers now.",
    multiprocess_mode="livesum",
)  # fmt: skip
CHATS_REJECTED = Counter(
    "omniroute_chats_rejected", "Chats refused with 503 because MAX_OPEN_STREAMS were open.",
)  # fmt: skip
STREAMS_ENDED = Counter(
    "omniroute_streams_ended", "Relayed chats by how they ended: complete, client_left (the "
    "provider's stream closed at once), upstream_failed, or shutdown (cut at the grace's end).",
    ["how"],
)  # fmt: skip
QUEUE_DEPTH = Gauge(
    "omniroute_queue_depth", "Jobs waiting, by queue (at the last scrape).", ["queue"],
    multiprocess_mode="max",
)  # fmt: skip
EMBEDDING_CACHE = Gauge(
    "omniroute_embedding_cache", "The embedding cache's hits and misses in this process.",
    ["result"], multiprocess_mode="sum",
)  # fmt: skip


def counted(job: str) -> Callable[[F], F]:
    """Count each run of a job function by outcome (ok, failed) in JOBS."""

    def wrap(func: F) -> F:
        @functools.wraps(func)
        def run(*args: Any, **kwargs: Any) -> Any:
            try:
                result = func(*args, **kwargs)
            except Exception:
                JOBS.labels(job, "failed").inc()
                raise
            JOBS.labels(job, "ok").inc()
            return result

        return run  # type: ignore[return-value]

    return wrap


def exposition(multiprocess_dir: str | None) -> tuple[bytes, str]:
    """The metrics as Prometheus text, and its content type (summed over the processes that
    share `multiprocess_dir`, the PROMETHEUS_MULTIPROC_DIR setting, when there is one)."""
    if multiprocess_dir:
        registry = CollectorRegistry()
        multiprocess.MultiProcessCollector(registry)
    else:
        registry = REGISTRY
    return generate_latest(registry), CONTENT_TYPE_LATEST
