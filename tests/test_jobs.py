import logging
import subprocess
import sys
from datetime import timedelta
from pathlib import Path

import pytest
from rq import Queue
from rq.registry import FailedJobRegistry
from sqlalchemy import update

from omniroute.core.clock import to_iso
from omniroute.core.db.tables import extraction_outbox
from omniroute.jobs import EXTRACT_FACTS, EXTRACTION_QUEUE, queue, requeue_stale_extractions
from omniroute.memory.model import MemoryFilter
from tests import job_functions
from tests.helpers import REDIS_TEST_URL, environment, eventually

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
