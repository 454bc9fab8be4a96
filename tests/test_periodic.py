"""Periodic jobs: the shared record, the in-process scheduler, `flask jobs`, /api/jobs."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from datetime import timedelta
from pathlib import Path

import pytest
from click.testing import CliRunner

from omniroute.core.clock import to_iso
from omniroute.core.config import SETTINGS_BY_NAME
from omniroute.core.db.tables import periodic_runs
from omniroute.factory import create_app
from omniroute.jobs.periodic.runs import Claim, PeriodicRuns
from omniroute.jobs.periodic.schedule import PERIODIC_JOBS
from omniroute.jobs.periodic.scheduler import Scheduler
from tests.helpers import ADMIN_TOKEN, app_settings, eventually

ADMIN = {"Authorization": f"Bearer {ADMIN_TOKEN}"}


@pytest.fixture
def runs(database, clock):
    return PeriodicRuns(database, clock=clock)


@pytest.mark.both_stores
def test_a_job_runs_once_an_interval_and_never_twice_at_once(runs, clock):
    first = runs.claim("j", interval=60, lease_seconds=600)
    assert isinstance(first, Claim)
    assert "holds it" in runs.claim("j", interval=60, lease_seconds=600, force=True)
    runs.finish(first, result={"done": 1})
    assert "not due" in runs.claim("j", interval=60, lease_seconds=600)
    assert isinstance(runs.claim("j", interval=60, lease_seconds=600, force=True), Claim)
    record = runs.all()["j"]
    assert record["status"] == "running" and record["runs"] == 1
    assert record["result"] == {"done": 1}


@pytest.mark.both_stores
def test_a_run_that_died_frees_the_job_when_its_lease_ends(runs, clock):
    runs.claim("j", interval=60, lease_seconds=600)  # never finished: the process died
    clock.advance(seconds=599)
    assert "holds it" in runs.claim("j", interval=60, lease_seconds=600)
    clock.advance(seconds=2)
    assert isinstance(runs.claim("j", interval=60, lease_seconds=600), Claim)


@pytest.mark.both_stores
def test_a_failure_is_recorded_and_counted(runs, clock):
    claim = runs.claim("j", interval=60, lease_seconds=600)
    clock.advance(seconds=3)
    runs.finish(claim, error="ValueError: boom")
    record = runs.all()["j"]
    assert (record["status"], record["error"], record["failures"]) == (
        "failed",
        "ValueError: boom",
        1,
    )
    assert record["duration_ms"] == 3000 and record["lease_until"] is None


@pytest.mark.both_stores
def test_claims_racing_from_many_threads_let_exactly_one_run(runs):
    with ThreadPoolExecutor(8) as pool:
        claims = list(
            pool.map(lambda _: runs.claim("j", interval=60, lease_seconds=600), range(16))
        )
    assert sum(isinstance(claim, Claim) for claim in claims) == 1


def fake_scheduler(app, runs, tmp_path, ran, interval=0.4):
    def run(job_id):
        claim = runs.claim(job_id, interval=interval, lease_seconds=60)
        if isinstance(claim, Claim):
            ran.append(job_id)
            runs.finish(claim, result={})

    return Scheduler(app, runs, [("a", interval), ("b", interval * 10)], run, str(tmp_path))


def test_two_schedulers_on_one_data_dir_take_turns_by_the_lock(app, tmp_path):
    runs = PeriodicRuns(app.extensions["omniroute"].db)
    ran: list[str] = []
    first, second = (fake_scheduler(app, runs, tmp_path / "shared", ran) for _ in range(2))
    first.start()
    second.start()
    try:
        assert eventually(lambda: ran.count("a") >= 3, timeout=10)
        assert first.holds_lock != second.holds_lock
        holder, other = (first, second) if first.holds_lock else (second, first)
        assert ran.count("b") == 1, "b's interval has not come round again"
        holder.stop()  # the process stopped: the other takes over
        assert eventually(lambda: other.holds_lock, timeout=10)
    finally:
        first.stop()
        second.stop()


def test_schedulers_of_two_data_dirs_on_one_database_do_not_double_run(app, tmp_path):
    runs = PeriodicRuns(app.extensions["omniroute"].db)
    ran: list[str] = []
    schedulers = [fake_scheduler(app, runs, tmp_path / name, ran, interval=1.0) for name in "xy"]
    for scheduler in schedulers:
        scheduler.start()
    try:
        assert all(eventually(lambda s=s: s.holds_lock) for s in schedulers)
        assert eventually(lambda: ran.count("a") >= 3, timeout=10), "job a ran under 3 times"
    finally:
        for scheduler in schedulers:
            scheduler.stop()
    record = runs.all()["a"]
    assert ran.count("a") == record["runs"]
    assert ran.count("b") == 1


def test_a_job_not_run_at_start_waits_one_interval_from_the_start(app, runs, clock):
    scheduler = Scheduler(
        app, runs, [("a", 60), ("b", 60)], lambda job_id: None, "/nonexistent", not_at_start=["b"]
    )
    assert scheduler.due(clock()) == ["a"]
    clock.advance(seconds=61)
    assert scheduler.due(clock()) == ["a", "b"]


def test_the_web_process_runs_every_periodic_job_and_reports_it(tmp_path):
    app = create_app(
        app_settings(tmp_path, None, OUTBOX_SWEEP_INTERVAL=1, MEMORY_BACKEND_HEALTH_INTERVAL=1)
    )
    svc = app.extensions["omniroute"]
    try:
        assert eventually(lambda: len(svc.periodic_runs.all()) == len(PERIODIC_JOBS), timeout=15)

        # backend-health waits one interval after the start (which initialised the backends).
        def local_healthy() -> bool:
            result = svc.periodic_runs.all()["backend-health"]["result"]  # None while it runs
            return bool(result and result["backends"]["local"]["ok"])

        assert eventually(local_healthy, timeout=15)
        assert eventually(lambda: svc.periodic_runs.all()["outbox-sweep"]["runs"] >= 2, timeout=15)
        with app.app_context():
            report = svc.periodic_report()
        assert report["scheduler"].startswith("a thread")
        by_id = {job["id"]: job for job in report["jobs"]}
        assert by_id["retention-sweep"]["status"] == "ok"
        assert by_id["retention-sweep"]["result"]["expired"] == 0
        assert by_id["summarize"]["result"] == {"off": "the autoSummarize setting is off"}
        assert not by_id["outbox-sweep"]["overdue"]
    finally:
        svc.close()


def test_with_redis_the_web_thread_leaves_all_but_the_sweep_and_health_to_the_clock(tmp_path):
    app = create_app(app_settings(tmp_path, None, REDIS_URL="redis://127.0.0.1:6379/15"))
    svc = app.extensions["omniroute"]
    try:
        assert svc.scheduler.job_ids == ("outbox-sweep", "backend-health")
        with app.app_context():
            assert svc.periodic_report()["scheduler"].startswith("clock process")
    finally:
        svc.close()


def test_flask_jobs_list_and_run(app):
    app.extensions["omniroute"].scheduler.stop()  # no run of its own beside this test's
    runner = CliRunner()
    with app.app_context():
        result = runner.invoke(app.cli, ["jobs", "run", "retention-sweep"])
        assert result.exit_code == 0, result.output
        assert '"expired": 0' in result.output
        listed = runner.invoke(app.cli, ["jobs", "list"])
    assert listed.exit_code == 0
    assert "retention-sweep  every 3600 s  ok" in listed.output
    assert "summarize  every 86400 s" in listed.output


def test_api_jobs_lists_runs_and_refuses_unknown_ids(client, svc):
    svc.scheduler.stop()  # no run of its own beside this test's
    response = client.post("/api/jobs/retention-sweep/run", headers=ADMIN)
    assert response.status_code == 200
    assert response.json["status"] == "ok" and response.json["skipped"] is None
    assert response.json["runs"] >= 1
    listed = client.get("/api/jobs", headers=ADMIN).json
    assert {job["id"] for job in listed["jobs"]} == {job.id for job in PERIODIC_JOBS}
    assert client.post("/api/jobs/nope/run", headers=ADMIN).status_code == 404
    assert client.get("/api/jobs").status_code == 401


def test_a_forced_run_beside_a_running_one_is_a_skip(client, svc):
    svc.scheduler.stop()  # its own run at start must not race this test's
    claim = svc.periodic_runs.claim("summarize", interval=86400, lease_seconds=600, force=True)
    response = client.post("/api/jobs/summarize/run", headers=ADMIN)
    assert "holds it" in response.json["skipped"]
    svc.periodic_runs.finish(claim, result={})


def test_a_failing_job_is_recorded_as_failed(client, svc, monkeypatch):
    svc.scheduler.stop()  # no run of its own beside this test's

    def boom():
        raise RuntimeError("disk full")

    monkeypatch.setattr(svc.retention_sweep, "run", boom)
    response = client.post("/api/jobs/retention-sweep/run", headers=ADMIN)
    assert response.status_code == 200
    assert response.json["status"] == "failed"
    assert response.json["error"] == "RuntimeError: disk full"


def test_overdue_means_not_started_for_two_intervals(app, svc):
    svc.scheduler.stop()  # no run of its own beside this test's
    with app.app_context():
        claim = svc.periodic_runs.claim("summarize", interval=86400, lease_seconds=600, force=True)
        svc.periodic_runs.finish(claim, result={})
        assert not _job(svc, "summarize")["overdue"]
        with svc.db.write() as conn:
            old = to_iso(svc.periodic_runs.clock() - timedelta(days=3))
            conn.execute(periodic_runs.update().values(started_at=old))
        assert _job(svc, "summarize")["overdue"]
        assert _job(svc, "retention-sweep")["overdue"], "never run, though it runs at start"
        assert not _job(svc, "backend-health")["overdue"], "its first run is an interval away"


def _job(svc, job_id):
    return next(job for job in svc.periodic_report()["jobs"] if job["id"] == job_id)


def test_the_readme_table_names_every_periodic_job_and_its_setting():
    readme = (Path(__file__).resolve().parent.parent / "docs" / "life-cycle.md").read_text()
    for job in PERIODIC_JOBS:
        row = next((line for line in readme.splitlines() if line.startswith(f"| `{job.id}` |")), "")
        assert f"`{job.interval_setting}`" in row, f"docs/life-cycle.md's jobs table: {job.id}"
        default = SETTINGS_BY_NAME[job.interval_setting].default
        assert f"{default} s" in row, job.id
