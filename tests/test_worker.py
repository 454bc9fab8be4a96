"""The worker process as a platform runs it (the Procfile's long-lived `worker`): idle for
longer than every timeout, stopped by SIGTERM mid-job or with its stop swallowed, killed with
its work horse, and registered again after a Redis restart."""

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from rq import Worker
from rq.job import Job, JobStatus

from omniroute.jobs import QUEUES
from omniroute.jobs.worker import GatewayWorker
from tests import job_functions
from tests.helpers import REDIS_TEST_URL, environment, eventually, stop
from tests.test_jobs import TEXT, chat, keys_of

ROOT = Path(__file__).resolve().parent.parent


def start_worker(data_dir: Path, log) -> subprocess.Popen:
    """The Procfile's worker line, long-lived (not --burst), logging into `log`."""
    return subprocess.Popen(
        [sys.executable, "-m", "flask", "--app", "app", "worker"],
        cwd=ROOT,
        env=environment(DATA_DIR=str(data_dir), REDIS_URL=REDIS_TEST_URL),
        stdout=log,
        stderr=subprocess.STDOUT,
    )


def log_text(log) -> str:
    log.seek(0)
    return log.read()


def read(path: Path) -> str:
    return path.read_text() if path.exists() else ""


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


def test_killing_a_horse_that_is_not_there_never_signals_the_workers_own_group():
    # In a session of its own: were the guard missing, the script would kill only itself.
    script = (
        "import os, redis\n"
        "from omniroute.jobs.worker import GatewayWorker\n"
        f"connection = redis.Redis.from_url({REDIS_TEST_URL!r})\n"
        "worker = GatewayWorker(['default'], connection=connection)\n"
        "for pid in (0, os.getpid(), 2**22 + 12345):  # none, itself, a pid that is not there\n"
        "    worker._horse_pid = pid\n"
        "    worker.kill_horse()\n"
        "print('alive')\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", script], cwd=ROOT, env=environment(), capture_output=True,
        text=True, timeout=60, start_new_session=True,
    )  # fmt: skip
    assert done.returncode == 0 and done.stdout.strip() == "alive", done.stderr
