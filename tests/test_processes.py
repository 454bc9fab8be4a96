"""The real entry points as separate processes: the web server, the CLI and the RQ worker."""

from __future__ import annotations

import subprocess
import sys
import urllib.request

import pytest
from prometheus_client.parser import text_string_to_metric_families

from omniroute.core.db import migrate
from tests.gateway_server import ROOT, call, web_process
from tests.helpers import ADMIN_TOKEN, REDIS_TEST_URL, environment

# Every test here starts the real entry points as processes.
pytestmark = pytest.mark.slow


@pytest.fixture
def server(tmp_path):
    with web_process(tmp_path / "server.log", DATA_DIR=str(tmp_path / "data")) as (base, log):
        yield base, tmp_path / "data", log


def test_metrics_add_up_across_web_processes_sharing_a_multiprocess_dir(tmp_path):
    folder = tmp_path / "prometheus"
    folder.mkdir()
    shared = {
        "DATA_DIR": str(tmp_path / "data"),
        "OMNIROUTE_ADMIN_TOKEN": ADMIN_TOKEN,
        "PROMETHEUS_MULTIPROC_DIR": str(folder),
    }
    with (
        web_process(tmp_path / "a.log", **shared) as (first, _),
        web_process(tmp_path / "b.log", **shared) as (second, _),
    ):
        for base, times in ((first, 3), (second, 5)):
            for _ in range(times):
                assert call(f"{base}/readyz")[0] == 200
        request = urllib.request.Request(
            f"{first}/metrics", headers={"Authorization": f"Bearer {ADMIN_TOKEN}"}
        )
        with urllib.request.urlopen(request, timeout=10) as response:
            text = response.read().decode()
    samples = [
        sample
        for family in text_string_to_metric_families(text)
        for sample in family.samples
        if sample.name == "omniroute_http_requests_total" and sample.labels["route"] == "/readyz"
    ]
    assert sum(sample.value for sample in samples) == 8, "both processes' requests"


def test_the_web_process_serves_the_api_with_uvicorn(server):
    base, data_dir, log = server
    token = (data_dir / "admin_token").read_text().strip()
    status, headers, _ = call(f"{base}/healthz")
    assert status == 200 and headers["server"] == "uvicorn"

    status, _, key = call(f"{base}/api/keys", "POST", {"name": "curl user"}, token)
    assert status == 201
    status, _, created = call(
        f"{base}/api/memory",
        "POST",
        {"apiKeyId": key["id"], "key": "pref:shell", "content": "Uses fish shell"},
        token,
    )
    assert status == 201
    status, _, listed = call(f"{base}/api/memory?q=fish", token=token)
    assert [m["id"] for m in listed["data"]] == [created["memory"]["id"]]
    assert call(f"{base}/api/memory")[0] == 401

    log.seek(0)
    output = log.read()
    assert str(data_dir / "admin_token") in output
    assert token not in output, "the admin token must never be logged"


def run_flask(*args: str, **env: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "flask", "--app", "app", *args],
        cwd=ROOT,
        env=environment(**env),
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_db_upgrade_migrates_a_fresh_database(tmp_path):
    result = run_flask("db", "upgrade", DATA_DIR=str(tmp_path))
    assert result.returncode == 0, result.stderr
    assert f"is at revision {migrate.revisions()[-1].revision}" in result.stdout
    assert "applied migration 0001_memories" in result.stderr


def test_the_worker_serves_the_queues_of_a_real_redis(tmp_path, redis_db):
    result = run_flask("worker", "--burst", DATA_DIR=str(tmp_path), REDIS_URL=REDIS_TEST_URL)
    assert result.returncode == 0, result.stderr
    assert "default" in result.stderr  # RQ logs the queues it listens on


def test_the_worker_refuses_to_start_without_redis(tmp_path):
    result = run_flask("worker", "--burst", DATA_DIR=str(tmp_path))
    assert result.returncode == 2
    assert "REDIS_URL is not set" in result.stderr
