"""Background jobs: RQ on Redis when REDIS_URL is set, else a thread pool in this process.

`enqueue` returns at once: handing the job to Redis happens on the pool too, so a slow or
unreachable Redis never delays a response (a job that asks for another, in a worker, hands
it to Redis itself: no response waits there). When Redis cannot take a job (down, timing out),
the job runs in this process instead, so an extraction is not lost while Redis is down.
Either way a failing job is retried 3 times with backoff; on RQ it then stays in RQ's failed
job registry. Jobs are functions that take ids and plain values, never objects.
"""

from __future__ import annotations

import logging
import threading
import time
import uuid
from collections.abc import Callable, Sequence
from concurrent.futures import Future, ThreadPoolExecutor, wait
from typing import Any

import redis
from flask import Flask
from rq import Queue, Retry, Worker, get_current_job
from rq.exceptions import NoSuchJobError
from rq.job import Job, JobStatus
from rq.utils import import_attribute

from .logs import bound_request_id, current_request_id

log = logging.getLogger(__name__)

RQ_RETRY_INTERVALS = (5, 30, 120)
LOCAL_RETRY_INTERVALS = (0.5, 2.0, 5.0)
FAILED_JOB_TTL = 7 * 24 * 3600
RESULT_TTL = 3600


class JobQueue:
    def __init__(
        self, app: Flask, connection: redis.Redis | None, queue_names: Sequence[str] = ()
    ) -> None:
        self._app = app
        self._redis = connection
        self._queue_names = tuple(queue_names)  # reported by status()
        self._pool = ThreadPoolExecutor(max_workers=2, thread_name_prefix="omniroute-job")
        self._futures: set[Future] = set()
        self._waiting: set[str] = set()
        self._lock = threading.Lock()

    def enqueue(
        self,
        queue_name: str,
        func: Callable[..., Any] | str,
        *args: Any,
        unique_id: str | None = None,
        in_process: bool = False,
    ) -> str | None:
        """Run `func(*args)` in the background, on the named RQ queue when there is Redis.

        `func` is a module-level function or its dotted path (imported when the job runs).

        With `unique_id`, nothing is added while a job of that id still waits to start (one
        may be running): repeated requests for the same work fold into one run. Returns the
        job id, or None when folded. `in_process` runs it here even when there is Redis (work
        only this process can do).
        """
        if unique_id is not None:
            with self._lock:
                if unique_id in self._waiting:
                    return None
                self._waiting.add(unique_id)
        job_id = unique_id or uuid.uuid4().hex
        request_id = current_request_id()  # the job's log lines carry it
        if in_process:
            self._submit(self._run_here, func, args, job_id, request_id)
        elif get_current_job() is not None:
            # Inside an RQ job, in the work horse RQ forked for it: the horse exits when the
            # job returns, before a pool thread would hand this on. Hand it on now.
            self._dispatch(queue_name, func, args, job_id, request_id)
        else:
            self._submit(self._dispatch, queue_name, func, args, job_id, request_id)
        return job_id

    def wait(self, timeout: float | None = None) -> None:
        """Block until the jobs submitted so far have been handed on or run."""
        with self._lock:
            pending = set(self._futures)
        wait(pending, timeout=timeout)

    def status(self) -> dict[str, Any]:
        """Where jobs run: in this process, or on RQ with its workers (their heartbeats) and
        the jobs waiting on each queue. Redis being down is reported, not raised."""
        if self._redis is None:
            return {"backend": "in-process", "available": True, "reason": None, "workers": []}
        try:
            workers = [
                {
                    "name": worker.name,
                    "state": worker.get_state(),
                    "queues": worker.queue_names(),
                    "lastHeartbeat": worker.last_heartbeat.isoformat()
                    if worker.last_heartbeat
                    else None,
                }
                for worker in Worker.all(connection=self._redis)
            ]
            queued = {name: Queue(name, connection=self._redis).count for name in self._queue_names}
        except (redis.ConnectionError, redis.TimeoutError) as exc:
            reason = f"Redis unavailable, jobs run in-process: {type(exc).__name__}"
            return {"backend": "rq", "available": False, "reason": reason, "workers": []}
        reason = None if workers else "no worker is running: jobs wait in Redis"
        return {
            "backend": "rq",
            "available": bool(workers),
            "reason": reason,
            "workers": workers,
            "queued": queued,
        }

    def busy(self) -> bool:
        """Whether a job submitted here has yet to be handed on or run."""
        with self._lock:
            return bool(self._futures)

    def shutdown(self) -> None:
        self._pool.shutdown(wait=True)

    def _submit(self, target: Callable[..., None], *args: Any) -> None:
        try:
            future = self._pool.submit(target, *args)
        except RuntimeError:  # shut down: a job asked for another as the process stops
            log.info("not queued, shutting down: %s", args[1] if len(args) > 1 else target)
            return
        with self._lock:
            self._futures.add(future)
        future.add_done_callback(self._forget)

    def _forget(self, future: Future) -> None:
        with self._lock:
            self._futures.discard(future)

    def _dispatch(
        self,
        queue_name: str,
        func: Callable[..., Any] | str,
        args: tuple,
        job_id: str,
        request_id: str | None,
    ) -> None:
        if self._redis is not None:
            try:
                unique_id = job_id if job_id in self._waiting else None
                if unique_id is not None:
                    job_id = self._free_rq_slot(unique_id)
                    if job_id is None:  # a run of this job already waits in RQ
                        self._started(unique_id)
                        return
                Queue(queue_name, connection=self._redis).enqueue_call(
                    func,
                    args=args,
                    job_id=job_id,
                    retry=Retry(max=len(RQ_RETRY_INTERVALS), interval=list(RQ_RETRY_INTERVALS)),
                    failure_ttl=FAILED_JOB_TTL,
                    result_ttl=RESULT_TTL,
                    meta={"request_id": request_id} if request_id else None,
                )
                log.debug("job %s queued on %s", job_id, queue_name)
                if unique_id is not None:
                    self._started(unique_id)
                return
            except (redis.ConnectionError, redis.TimeoutError) as exc:
                log.warning("job %s: Redis unavailable (%s); running it in-process", job_id, exc)
        self._run_here(func, args, job_id, request_id)

    def _free_rq_slot(self, unique_id: str) -> str | None:
        """The id to queue a unique job under, or None when a run of it already waits.

        Two slots take turns, so that one run may wait while another runs, and the id of a
        running job (whose record its worker still writes) is never reused.
        """
        for candidate in (unique_id, f"{unique_id}-next"):
            try:
                status = Job.fetch(candidate, connection=self._redis).get_status()
            except NoSuchJobError:
                return candidate
            if status in (JobStatus.QUEUED, JobStatus.SCHEDULED, JobStatus.DEFERRED):
                return None
            if status != JobStatus.STARTED:
                return candidate
        return None

    def _started(self, job_id: str) -> None:
        with self._lock:
            self._waiting.discard(job_id)

    def _run_here(
        self,
        func: Callable[..., Any] | str,
        args: tuple,
        job_id: str,
        request_id: str | None = None,
    ) -> None:
        self._started(job_id)
        name = func if isinstance(func, str) else func.__name__
        delays = (*LOCAL_RETRY_INTERVALS, None)
        for attempt, delay in enumerate(delays, start=1):
            try:
                with self._app.app_context(), bound_request_id(request_id):
                    (import_attribute(func) if isinstance(func, str) else func)(*args)
                return
            except Exception:
                if delay is None:
                    log.exception("job %s (%s) failed %d times", job_id, name, attempt)
                    return
                log.warning(
                    "job %s (%s) failed, attempt %d; retrying in %.1f s",
                    job_id,
                    name,
                    attempt,
                    delay,
                    exc_info=True,
                )
                time.sleep(delay)
