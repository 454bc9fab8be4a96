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
from datetime import UTC, datetime
from typing import Any

import redis
from flask import Flask
from rq import Queue, Retry, Worker, get_current_job
from rq.exceptions import NoSuchJobError
from rq.job import Job, JobStatus
from rq.utils import import_attribute

from omniroute.core.logs import bound_request_id, current_request_id

log = logging.getLogger(__name__)

# How long a worker may stay silent before it is taken for dead. The worker
# (jobs.worker.GatewayWorker) beats at least every WORKER_TTL - 15 s while idle (RQ's wait
# for a job is that long) and every JOB_HEARTBEAT_SECONDS while a job runs. One whose last
# beat is older than its bound was killed or lost its machine: status() lists it as gone,
# and the job it held is queued again by the next request for that job (`_free_rq_slot`).
WORKER_TTL = 60
JOB_HEARTBEAT_SECONDS = 10
MAINTENANCE_SECONDS = 30
# Beats missed before a worker counts as dead: three while busy, the idle wait plus 15 s.
BUSY_SILENCE_SECONDS = 3 * JOB_HEARTBEAT_SECONDS
IDLE_SILENCE_SECONDS = WORKER_TTL

RQ_RETRY_INTERVALS = (5, 30, 120)
LOCAL_RETRY_INTERVALS = (0.5, 2.0, 5.0)
FAILED_JOB_TTL = 7 * 24 * 3600
RESULT_TTL = 3600


def worker_alive(last_heartbeat: datetime | None, busy: bool, now: datetime | None = None) -> bool:
    """Whether a worker that last beat at `last_heartbeat` (UTC) is still there."""
    if last_heartbeat is None:
        return False
    if last_heartbeat.tzinfo is None:
        last_heartbeat = last_heartbeat.replace(tzinfo=UTC)
    silence = ((now or datetime.now(UTC)) - last_heartbeat).total_seconds()
    return silence <= (BUSY_SILENCE_SECONDS if busy else IDLE_SILENCE_SECONDS)


def _worker_status(worker: Worker) -> dict[str, Any]:
    """A worker as status() lists it; `state` is "gone" once it is past its heartbeat's
    lifetime (killed: RQ keeps its record for minutes)."""
    state = worker.get_state()
    beat = worker.last_heartbeat
    return {
        "name": worker.name,
        "state": state if worker_alive(beat, busy=state == "busy") else "gone",
        "queues": worker.queue_names(),
        "lastHeartbeat": beat.isoformat() if beat else None,
    }


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
            workers = [_worker_status(worker) for worker in Worker.all(connection=self._redis)]
            queued = {name: Queue(name, connection=self._redis).count for name in self._queue_names}
        except (redis.ConnectionError, redis.TimeoutError) as exc:
            reason = f"Redis unavailable, jobs run in-process: {type(exc).__name__}"
            return {"backend": "rq", "available": False, "reason": reason, "workers": []}
        alive = [worker for worker in workers if worker["state"] != "gone"]
        reason = None if alive else "no worker is running: jobs wait in Redis"
        return {
            "backend": "rq",
            "available": bool(alive),
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
                    job_id = self._free_rq_slot(queue_name, unique_id)
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

    def _free_rq_slot(self, queue_name: str, unique_id: str) -> str | None:
        """The id to queue a unique job under, or None when a run of it already waits.

        Two slots take turns, so that one run may wait while another runs, and the id of a
        running job (whose record its worker still writes) is never reused. A slot whose job
        RQ still calls queued or started, but that nobody holds (its worker was killed), is
        taken back: that is how a job lost with its worker runs again (`_abandoned`).
        """
        for candidate in (unique_id, f"{unique_id}-next"):
            try:
                job = Job.fetch(candidate, connection=self._redis)
            except NoSuchJobError:
                return candidate
            status = job.get_status()
            if status in (JobStatus.QUEUED, JobStatus.STARTED):
                if self._abandoned(queue_name, job):
                    log.warning("job %s was held by a worker that is gone; queued again", job.id)
                    return candidate
                if status == JobStatus.QUEUED:
                    return None
                continue
            if status in (JobStatus.SCHEDULED, JobStatus.DEFERRED):
                return None
            return candidate
        return None

    def _abandoned(self, queue_name: str, job: Job) -> bool:
        """Whether nobody holds a job RQ calls queued or started: it is not in its queue, not
        being taken from it, and not run by a living worker. Such a job is removed from RQ's
        started registry here (so that RQ's own clean-up does not run it a second time)."""
        queue = Queue(queue_name, connection=self._redis)
        with self._redis.pipeline(transaction=True) as pipe:  # one snapshot of all three
            pipe.lpos(queue.key, job.id)
            pipe.lpos(queue.intermediate_queue.key, job.id)
            pipe.zrange(queue.started_job_registry.key, 0, -1)
            waiting, taking, started = pipe.execute()
        if waiting is not None or taking is not None:
            return False
        mine = job.id.encode()
        held = [entry for entry in started if entry == mine or entry.startswith(mine + b":")]
        if held:
            worker = job.worker_name and Worker.find_by_key(
                Worker.redis_worker_namespace_prefix + job.worker_name, connection=self._redis
            )
            if worker and worker_alive(worker.last_heartbeat, busy=True):
                return False
            # Whoever removes the entry first requeues it: RQ's clean-up, or this.
            return self._redis.zrem(queue.started_job_registry.key, *held) > 0
        return True

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
