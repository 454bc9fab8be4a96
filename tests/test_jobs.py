import logging
import os
import signal
import subprocess
import sys
import time
from datetime import timedelta
from pathlib import Path

import pytest
from rq import Queue, Worker
from rq.job import Job, JobStatus
from rq.registry import FailedJobRegistry
from sqlalchemy import update

from omniroute.core.clock import to_iso
from omniroute.core.db.tables import extraction_outbox
from omniroute.jobs import EXTRACT_FACTS, EXTRACTION_QUEUE, QUEUES, queue, requeue_stale_extractions
from omniroute.jobs.worker import GatewayWorker
from omniroute.memory.model import MemoryFilter
from tests import job_functions
from tests.helpers import REDIS_TEST_URL, environment, eventually, stop

ROOT = Path(__file__).resolve().parent.parent
TEXT = "I prefer TypeScript. I always commit before pushing."


def chat(app, text: str) -> str:
    """One chat through the gateway as a new key; return the key's id."""
    svc = app.extensions["omniroute"]
    key, secret = svc.keys.create("jobs")
    response = app.test_client().post(
        "/v1/chat/completions",
        json={"model": "fake/m", "messages": [{"role": "user", "content": text}]},
        headers={"Authorization": f"Bearer {secret}"},
    )
    assert response.status_code == 200, response.json
    return key.id


def keys_of(app, api_key_id: str) -> list[str]:
    found = app.extensions["omniroute"].memories.find(MemoryFilter(api_key_id=api_key_id))
    return sorted(memory.key for memory in found)


def start_worker(data_dir: Path, log) -> subprocess.Popen:
    """The Procfile's worker line, long-lived (not --burst), logging into `log`."""
    return subprocess.Popen(
        [sys.executable, "-m", "flask", "--app", "app", "worker"],
        cwd=ROOT,
        env=environment(DATA_DIR=str(data_dir), REDIS_URL=REDIS_TEST_URL),
        stdout=log,
        stderr=subprocess.STDOUT,
    )


def run_worker(data_dir: Path, **settings: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "flask", "--app", "app", "worker", "--burst"],
        cwd=ROOT,
        env=environment(DATA_DIR=str(data_dir), REDIS_URL=REDIS_TEST_URL, **settings),
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_with_redis_extraction_runs_in_a_real_rq_worker(make_app, redis_db, tmp_path):
    app = make_app(REDIS_URL=REDIS_TEST_URL)
    api_key_id = chat(app, TEXT)
    app.extensions["omniroute"].jobs.wait(10)
    extraction = Queue(EXTRACTION_QUEUE, connection=redis_db)
    assert extraction.count == 2, "one job for the message, one for the reply"
    assert keys_of(app, api_key_id) == [], "nothing runs in the web process"

    result = run_worker(tmp_path)
    assert result.returncode == 0, result.stderr
    assert keys_of(app, api_key_id) == ["pattern:commit_before_pushing", "preference:typescript"]
    assert extraction.count == 0


def test_without_redis_extraction_runs_in_process(make_app):
    app = make_app()
    api_key_id = chat(app, TEXT)
    found = eventually(lambda: keys_of(app, api_key_id))
    assert found == ["pattern:commit_before_pushing", "preference:typescript"]


def test_when_redis_is_down_the_proxy_answers_and_extraction_is_not_lost(make_app, caplog):
    app = make_app(REDIS_URL="redis://127.0.0.1:1/0")
    with caplog.at_level(logging.WARNING):
        api_key_id = chat(app, TEXT)
        found = eventually(lambda: keys_of(app, api_key_id))
    assert found == ["pattern:commit_before_pushing", "preference:typescript"]
    assert "Redis unavailable" in caplog.text


def test_a_failing_rq_job_is_retried_three_times_then_kept_as_failed(
    make_app, redis_db, tmp_path, monkeypatch
):
    monkeypatch.setattr(queue, "RQ_RETRY_INTERVALS", (0, 0, 0))
    app = make_app(REDIS_URL=REDIS_TEST_URL)
    jobs = app.extensions["omniroute"].jobs
    job_id = jobs.enqueue("default", job_functions.always_fails, "rq")
    jobs.wait(10)
    result = run_worker(tmp_path)
    assert result.returncode == 0, result.stderr
    assert result.stderr.count("fails on purpose") >= 4, "the first run and three retries"
    failed = FailedJobRegistry("default", connection=redis_db)
    assert failed.get_job_ids() == [job_id]


def test_a_job_that_asks_for_another_in_a_real_worker_gets_it_run(make_app, redis_db, tmp_path):
    # Regression: the request went to a pool thread of RQ's work horse, which exits when its
    # job returns: a worker's extraction never got its backfill, nor a built model its use.
    app = make_app(REDIS_URL=REDIS_TEST_URL)
    jobs = app.extensions["omniroute"].jobs
    marker = tmp_path / "follow-up-ran"
    jobs.enqueue("default", job_functions.asks_for_another, str(marker))
    jobs.wait(10)
    result = run_worker(tmp_path)
    assert result.returncode == 0, result.stderr
    assert marker.read_text() == "ran", result.stderr


@pytest.fixture
def local_jobs(make_app, monkeypatch):
    monkeypatch.setattr(queue, "LOCAL_RETRY_INTERVALS", (0, 0, 0))
    job_functions.CALLS.clear()
    return make_app().extensions["omniroute"].jobs


def test_an_in_process_job_is_retried_until_it_succeeds(local_jobs):
    local_jobs.enqueue("default", job_functions.fails_twice, "local")
    local_jobs.wait(10)
    assert job_functions.CALLS == ["local"] * 3


def test_an_in_process_job_that_keeps_failing_is_logged_with_its_id(local_jobs, caplog):
    with caplog.at_level(logging.WARNING):
        job_id = local_jobs.enqueue("default", job_functions.always_fails, "doomed")
        local_jobs.wait(10)
    assert job_functions.CALLS == ["doomed"] * 4
    assert f"job {job_id} (always_fails) failed 4 times" in caplog.text


def test_a_unique_job_waits_in_rq_at_most_once(make_app, redis_db):
    jobs = make_app(REDIS_URL=REDIS_TEST_URL).extensions["omniroute"].jobs
    for _ in range(3):
        jobs.enqueue("default", job_functions.fails_twice, "u", unique_id="only-one")
        jobs.wait(10)
    assert Queue("default", connection=redis_db).get_job_ids() == ["only-one"]


def test_a_long_lived_worker_idle_past_every_timeout_still_takes_the_next_job(
    make_app, redis_db, tmp_path
):
    # Regression: the worker reused the web's pooled connection (5 s socket timeout) and
    # quit ("Redis connection timeout, quitting...") about 5 s after it went idle.
    app = make_app(REDIS_URL=REDIS_TEST_URL)
    with (tmp_path / "worker.log").open("w+") as log:
        worker = start_worker(tmp_path, log)
        try:
            assert eventually(lambda: "Listening on" in log_text(log), timeout=30), log_text(log)
            jobs = app.extensions["omniroute"].engine_report()["jobs"]
            assert (jobs["backend"], jobs["available"], len(jobs["workers"])) == ("rq", True, 1)
            assert jobs["workers"][0]["lastHeartbeat"], "the worker's heartbeat is its probe"
            time.sleep(IDLE_SECONDS)
            assert worker.poll() is None, log_text(log)
            api_key_id = chat(app, TEXT)
            found = eventually(lambda: keys_of(app, api_key_id), timeout=30)
            assert found == ["pattern:commit_before_pushing", "preference:typescript"]
            assert worker.poll() is None, log_text(log)
        finally:
            stopped_in_time = stop(worker)
        assert stopped_in_time, log_text(log)
        assert "quitting" not in log_text(log)


# Longer than the web's 5 s socket timeout, the one the worker used to inherit.
IDLE_SECONDS = 8


def log_text(log) -> str:
    log.seek(0)
    return log.read()


def read(path: Path) -> str:
    return path.read_text() if path.exists() else ""


def age_outbox(app, seconds: int = 120) -> None:
    """Make every outbox row look `seconds` old, as if its job had been lost that long ago."""
    svc = app.extensions["omniroute"]
    old = to_iso(svc.memories.clock() - timedelta(seconds=seconds))
    with svc.db.write() as conn:
        conn.execute(update(extraction_outbox).values(created_at=old))


def test_a_chats_texts_wait_in_the_outbox_until_their_facts_are_stored(make_app, redis_db):
    app = make_app(REDIS_URL=REDIS_TEST_URL)
    svc = app.extensions["omniroute"]
    chat(app, TEXT)
    svc.jobs.wait(10)
    assert svc.outbox.pending() == 2, "written in the request: the job only names its row"
    job = Queue(EXTRACTION_QUEUE, connection=redis_db).jobs[0]
    assert len(job.args) == 1, "the job carries an id, not the text"


def test_facts_survive_a_redis_restart_between_enqueue_and_pickup(make_app, redis_db, tmp_path):
    # Regression: jobs waiting in Redis were the only copy of a fact.
    app = make_app(REDIS_URL=REDIS_TEST_URL)
    svc = app.extensions["omniroute"]
    api_key_id = chat(app, TEXT)
    svc.jobs.wait(10)
    redis_db.flushdb()  # Redis restarted (it keeps nothing on disk): the jobs are gone
    assert svc.outbox.pending() == 2
    assert requeue_stale_extractions(svc.jobs, svc.outbox) == 0, "too young to be taken for lost"
    age_outbox(app)
    assert requeue_stale_extractions(svc.jobs, svc.outbox) == 2
    svc.jobs.wait(10)
    assert run_worker(tmp_path).returncode == 0
    assert keys_of(app, api_key_id) == ["pattern:commit_before_pushing", "preference:typescript"]
    assert svc.outbox.pending() == 0


def test_a_job_queued_twice_stores_its_facts_once(make_app, redis_db, tmp_path):
    app = make_app(REDIS_URL=REDIS_TEST_URL)
    svc = app.extensions["omniroute"]
    api_key_id = chat(app, TEXT)
    svc.jobs.wait(10)
    age_outbox(app)
    requeue_stale_extractions(svc.jobs, svc.outbox)  # while the first jobs still wait: folded
    svc.jobs.wait(10)
    assert Queue(EXTRACTION_QUEUE, connection=redis_db).count == 2
    assert run_worker(tmp_path).returncode == 0
    assert keys_of(app, api_key_id) == ["pattern:commit_before_pushing", "preference:typescript"]
    history = [len(svc.memories.history(m.id)) for m in svc.memories.find(MemoryFilter())]
    assert history == [1, 1], "one create each, no second write"


def test_without_redis_a_restarted_process_extracts_what_the_last_one_left(make_app, tmp_path):
    # The sweep runs once an interval, whichever process: the first ran it as it started.
    first = make_app(OUTBOX_SWEEP_INTERVAL=1)
    svc = first.extensions["omniroute"]
    key, _ = svc.keys.create("crash")
    svc.outbox.put(key.id, "s1", [(TEXT, "user_message")])  # written, never run: a crash
    age_outbox(first)
    first.extensions["omniroute"].scheduler.stop()  # the process is gone: its lock too
    second = make_app(OUTBOX_SWEEP_INTERVAL=1)  # its sweep takes the lost text
    found = eventually(lambda: keys_of(second, key.id))
    assert found == ["pattern:commit_before_pushing", "preference:typescript"]
    assert second.extensions["omniroute"].outbox.pending() == 0


def test_a_job_queued_before_the_outbox_still_extracts(make_app, redis_db, tmp_path):
    # A deploy leaves old jobs in Redis; they carry the text itself.
    app = make_app(REDIS_URL=REDIS_TEST_URL)
    key, _ = app.extensions["omniroute"].keys.create("old")
    Queue(EXTRACTION_QUEUE, connection=redis_db).enqueue(
        EXTRACT_FACTS, key.id, "s1", TEXT, "user_message"
    )
    assert run_worker(tmp_path).returncode == 0
    assert keys_of(app, key.id) == ["pattern:commit_before_pushing", "preference:typescript"]


def test_sigterm_stops_the_running_job_within_the_platforms_grace_and_it_runs_again(
    make_app, redis_db, tmp_path
):
    # A platform restarts or deploys with SIGTERM, then SIGKILL 30 s later: the worker
    # (RQ's HerokuWorker) stops the job in time, and its retries bring it back.
    app = make_app(REDIS_URL=REDIS_TEST_URL)
    jobs = app.extensions["omniroute"].jobs
    job_id = jobs.enqueue("default", job_functions.sleeps, 120)
    jobs.wait(10)
    with (tmp_path / "worker.log").open("w+") as log:
        worker = start_worker(tmp_path, log)
        try:
            status = lambda: Job.fetch(job_id, connection=redis_db).get_status()  # noqa: E731
            assert eventually(lambda: status() == JobStatus.STARTED, timeout=30), log_text(log)
            stopped_at = time.monotonic()
            worker.send_signal(signal.SIGTERM)
            worker.wait(timeout=30)
            assert time.monotonic() - stopped_at < 25, log_text(log)
        finally:
            if worker.poll() is None:
                worker.kill()
                worker.wait()
    assert status() in (JobStatus.SCHEDULED, JobStatus.QUEUED), "it will run again"


def test_a_worker_whose_stop_goes_astray_still_ends_before_the_platforms_sigkill(
    redis_db, tmp_path
):
    # RQ stops an idle worker by raising StopRequested from its signal handler; a broad
    # `except` on the way once swallowed it, and the worker took later jobs after its SIGTERM.
    # Here the stop is swallowed on purpose: the worker must still end within the deadline.
    script = (
        "from omniroute.jobs.worker import GatewayWorker, run_worker\n"
        "from app import app\n"
        "GatewayWorker.stop_deadline = 2\n"
        # As if StopRequested were swallowed, and the flag RQ's loop checks never seen.
        "GatewayWorker._shutdown = lambda self: setattr(self, '_stop_requested', False)\n"
        "run_worker(app)\n"
    )
    with (tmp_path / "worker.log").open("w+") as log:
        worker = subprocess.Popen(
            [sys.executable, "-c", script],
            cwd=ROOT,
            env=environment(DATA_DIR=str(tmp_path), REDIS_URL=REDIS_TEST_URL),
            stdout=log,
            stderr=subprocess.STDOUT,
        )
        try:
            # RQ's first maintenance comes after its signal handlers are in place.
            started = lambda: "cleaning registries for queue: default" in log_text(log)  # noqa: E731
            assert eventually(started, timeout=60), log_text(log)
            worker.send_signal(signal.SIGTERM)
            worker.wait(timeout=25)  # RQ's idle wait alone would keep it 45 s
        finally:
            stop(worker)
        assert "still running 2 s after its stop; ending the process" in log_text(log)


def test_a_worker_registers_again_when_a_restart_left_only_a_scrap_of_its_record(redis_db):
    # A Redis restart under a heartbeat: redis-py retried its write on the new server, which
    # then held the worker's key with one field and no entry in the registry of workers; the
    # worker saw its key and never registered again, so no process listed it (a flaky
    # test_dynos run found this).
    worker = GatewayWorker(list(QUEUES), connection=redis_db)
    worker.register_birth()
    redis_db.flushdb()  # the restart
    redis_db.hset(worker.key, "last_heartbeat", "2026-12-02T15:03:02Z")  # the retried write
    worker.heartbeat()
    assert [w.name for w in Worker.all(connection=redis_db)] == [worker.name]
    assert Worker.find_by_key(worker.key, connection=redis_db).birth_date is not None


def test_the_engine_status_says_where_jobs_run(make_app, redis_db):
    in_process = make_app().extensions["omniroute"].engine_report()["jobs"]
    assert (in_process["backend"], in_process["available"]) == ("in-process", True)
    assert in_process["extractionOutbox"] == 0
    waiting = make_app(REDIS_URL=REDIS_TEST_URL)
    chat(waiting, TEXT)
    waiting.extensions["omniroute"].jobs.wait(10)
    report = waiting.extensions["omniroute"].engine_report()["jobs"]
    assert report["available"] is False and report["reason"].startswith("no worker")
    assert report["queued"]["extraction"] == 2 and report["extractionOutbox"] == 2
    down = make_app(REDIS_URL="redis://127.0.0.1:1/0").extensions["omniroute"].engine_report()
    assert down["jobs"]["reason"].startswith("Redis unavailable, jobs run in-process")


def test_a_job_whose_worker_was_killed_runs_again_on_the_other_worker_exactly_once(
    make_app, redis_db, tmp_path
):
    """kill -9 leaves the job 'started' in RQ's records for good. The worker is listed as
    gone within half a minute, and the next request for the job (the outbox sweep's, for an
    extraction) queues it again: it runs to its end once, on the worker that is left."""
    app = make_app(REDIS_URL=REDIS_TEST_URL)
    jobs = app.extensions["omniroute"].jobs
    folder = tmp_path / "job"
    folder.mkdir()
    logs = {name: (tmp_path / f"{name}.log").open("w+") for name in ("doomed", "survivor")}
    doomed = subprocess.Popen(
        [sys.executable, "-m", "flask", "--app", "app", "worker"],
        cwd=ROOT,
        env=environment(DATA_DIR=str(tmp_path / "doomed"), REDIS_URL=REDIS_TEST_URL),
        stdout=logs["doomed"],
        stderr=subprocess.STDOUT,
        start_new_session=True,  # its work horse and scheduler die with it
    )
    survivor = None
    try:
        run = "tests.job_functions.runs_until_released"
        job_id = jobs.enqueue("default", run, str(folder), unique_id="lost-job")
        jobs.wait(10)
        assert eventually(
            lambda: Job.fetch(job_id, connection=redis_db).get_status() == JobStatus.STARTED,
            timeout=60,
        ), log_text(logs["doomed"])
        assert eventually(lambda: "started" in read(folder / "runs"), timeout=30)
        horse = int(read(folder / "runs").split()[1])  # RQ's work horse: a session of its own
        os.killpg(doomed.pid, signal.SIGKILL)
        os.kill(horse, signal.SIGKILL)
        doomed.wait(timeout=30)
        survivor = start_worker(tmp_path / "survivor", logs["survivor"])

        def states():
            return {w["name"].split(".")[0]: w["state"] for w in jobs.status()["workers"]}

        assert eventually(lambda: "gone" in states().values(), timeout=120), states()
        status = jobs.status()
        assert status["available"], "the survivor serves"
        assert sorted(states().values()) in (["gone", "idle"], ["busy", "gone"])

        (folder / "release").touch()
        assert jobs.enqueue("default", run, str(folder), unique_id="lost-job") == "lost-job"
        jobs.wait(10)
        assert eventually(lambda: read(folder / "runs").count("done") == 1, timeout=60), log_text(
            logs["survivor"]
        )
        assert eventually(
            lambda: Job.fetch(job_id, connection=redis_db).get_status() == JobStatus.FINISHED,
            timeout=30,
        )
        assert jobs.enqueue("default", run, str(folder), unique_id="lost-job") == "lost-job"
        jobs.wait(10)
        assert eventually(lambda: read(folder / "runs").count("done") == 2, timeout=60)
        runs = read(folder / "runs")
        assert (runs.count("started"), runs.count("done")) == (3, 2), (
            "the killed run, then one each"
        )
    finally:
        (folder / "release").touch()
        stop(*(worker for worker in (doomed, survivor) if worker is not None))
        for log in logs.values():
            log.close()
