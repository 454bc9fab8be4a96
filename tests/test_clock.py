"""The periodic jobs as the Procfile runs them: RQ's cron in a `clock` process enqueues them,
a real long-lived worker runs them, on one shared database with separate data dirs."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from contextlib import ExitStack
from datetime import timedelta
from pathlib import Path

import pytest

from omniroute.core.clock import to_iso
from omniroute.core.db.tables import memories
from omniroute.factory import create_app
from tests.helpers import ADMIN_TOKEN, REDIS_TEST_URL, backdate, environment, eventually, stop
from tests.test_app_manifest import procfile

ROOT = Path(__file__).resolve().parent.parent
pytestmark = pytest.mark.slow

INTERVALS = {
    "MEMORY_SWEEP_INTERVAL": "2",
    "OUTBOX_SWEEP_INTERVAL": "2",
    "MEMORY_SUMMARIZE_INTERVAL": "2",
}


def start(line: str, data_dir: Path, database_url: str, log) -> subprocess.Popen:
    """A Procfile line, run by a shell as a platform runs it, with its own data dir."""
    env = environment(
        DATA_DIR=str(data_dir),
        DATABASE_URL=database_url,
        REDIS_URL=REDIS_TEST_URL,
        OMNIROUTE_ADMIN_TOKEN=ADMIN_TOKEN,
        # The platform's PATH holds the app's environment (`rq`, `flask`): here, the venv's.
        PATH=f"{Path(sys.executable).parent}:{os.environ['PATH']}",
        **INTERVALS,
    )
    return subprocess.Popen(
        ["bash", "-c", f"exec {line}"], cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT
    )


@pytest.fixture
def shared(tmp_path, redis_db):
    """The web app (its own data dir) on a database file the processes share."""
    database_url = f"sqlite:///{tmp_path / 'shared.db'}"
    app = create_app(
        {
            "DATA_DIR": str(tmp_path / "web"),
            "DATABASE_URL": database_url,
            "REDIS_URL": REDIS_TEST_URL,
            "OMNIROUTE_ADMIN_TOKEN": ADMIN_TOKEN,
            **{name: int(value) for name, value in INTERVALS.items()},
        }
    )
    yield app, database_url
    app.extensions["omniroute"].close()


def log_text(tmp_path: Path) -> str:
    return "\n".join(f"--- {p.name}\n{p.read_text()[-3000:]}" for p in tmp_path.glob("*.log"))


def test_the_clock_and_a_worker_sweep_and_summarise(shared, tmp_path):
    app, database_url = shared
    svc = app.extensions["omniroute"]
    svc.memory_settings.update({"autoSummarize": True, "autoSummarizeDays": 30})
    svc.memories.create(api_key_id="a", key="old", content="I chose Go. Long ago.")
    backdate(svc.memories, "old", 40)
    svc.memories.create(api_key_id="a", key="live", content="stays")
    svc.memories.create(
        api_key_id="a",
        key="dead",
        content="goes",
        expires_at=to_iso(svc.memories.clock() + timedelta(seconds=1)),
    )
    time.sleep(1.1)
    lines = procfile()
    with ExitStack() as stack:
        for name in ("worker", "clock"):
            log = stack.enter_context((tmp_path / f"{name}.log").open("w"))
            process = start(lines[name], tmp_path / name, database_url, log)
            stack.callback(stop, process)
        done = eventually(
            lambda: all(
                svc.periodic_runs.all().get(job, {}).get("status") == "ok"
                for job in ("retention-sweep", "summarize")
            ),
            timeout=60,
        )
        assert done, log_text(tmp_path)
    record = svc.periodic_runs.all()["retention-sweep"]
    assert record["result"]["expired"] == 1
    assert record["runner"].split(":")[1] != str(os.getpid()), "run by the worker, not here"
    assert svc.periodic_runs.all()["summarize"]["result"]["summarized"] == 1
    with svc.db.read() as conn:
        keys = sorted(conn.execute(memories.select().with_only_columns(memories.c.key)).scalars())
    assert keys[0] == "live" and keys[1].startswith("summary_") and len(keys) == 2


def test_two_clocks_at_once_do_not_double_run_a_job(shared, tmp_path, redis_db):
    app, database_url = shared
    svc = app.extensions["omniroute"]
    lines = procfile()
    with ExitStack() as stack:
        for name in ("worker", "clock", "clock2"):
            log = stack.enter_context((tmp_path / f"{name}.log").open("w"))
            line = lines["clock" if name == "clock2" else name]
            process = start(line, tmp_path / name, database_url, log)
            stack.callback(stop, process)
        started = time.monotonic()
        assert eventually(
            lambda: svc.periodic_runs.all().get("retention-sweep", {}).get("runs", 0) >= 3,
            timeout=60,
        ), log_text(tmp_path)
        elapsed = time.monotonic() - started
        runs = svc.periodic_runs.all()["retention-sweep"]["runs"]
    enqueued = redis_db.zcard("rq:cron_job:retention-sweep:jobs")
    # Each clock enqueues every 2 s; the shared record lets one run through an interval.
    assert enqueued >= runs + 2, (enqueued, runs)
    assert runs <= elapsed / (2 * 0.9) + 2, (runs, elapsed)
