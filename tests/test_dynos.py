"""Web and worker as a platform runs them: separate processes on separate disks.

Nothing is shared but one PostgreSQL (pgserver's, with pgvector) and one Redis: the release
process migrates, the worker extracts a chat's fact, builds the static model and embeds the
fact, and the web process, which built nothing and reads no file of the worker's, injects
that fact into the next request, found by meaning alone.
"""

from __future__ import annotations

import subprocess
import sys
from datetime import timedelta
from pathlib import Path

import openai
import pytest
import redis
from rq import Queue

from omniroute.factory import create_app
from omniroute.jobs import DEFAULT_QUEUE
from omniroute.memory.model import MemoryFilter
from tests.gateway_server import call
from tests.helpers import (
    ADMIN_TOKEN,
    REDIS_TEST_URL,
    app_settings,
    environment,
    eventually,
    free_port,
    stop,
)
from tests.job_functions import leaves_a_mark

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parent.parent
SECRET_KEY = "dyno-test-secret-key"


@pytest.fixture
def dynos(tmp_path, pg_database, redis_db, upstream):
    """release, then web and worker, each with a DATA_DIR of its own; their logs."""
    pg_database.empty()
    provider = f'[{{"id": "fake", "baseUrl": "{upstream.base_url}", "models": ["m"]}}]'
    shared = {
        "DATABASE_URL": pg_database.url,
        "REDIS_URL": REDIS_TEST_URL,
        "OMNIROUTE_ADMIN_TOKEN": ADMIN_TOKEN,
        "OMNIROUTE_SECRET_KEY": SECRET_KEY,
        "OMNIROUTE_PROVIDERS": provider,
    }

    def start(name: str, *command: str, **more: str) -> tuple[subprocess.Popen, Path]:
        log_path = tmp_path / f"{name}.log"
        with log_path.open("w") as log:  # the child keeps its own copy of the descriptor
            process = subprocess.Popen(
                [sys.executable, "-m", *command],
                cwd=ROOT,
                env=environment(**shared, DATA_DIR=str(tmp_path / name), **more),
                stdout=log,
                stderr=subprocess.STDOUT,
            )
        return process, log_path

    release, release_log = start("release", "flask", "--app", "app", "db", "upgrade")
    assert release.wait(timeout=120) == 0, release_log.read_text()
    port = free_port()
    web, web_log = start("web", "omniroute.serve", HOST="127.0.0.1", PORT=str(port))
    worker, worker_log = start("worker", "flask", "--app", "app", "worker")
    base = f"http://127.0.0.1:{port}"
    try:
        ready = eventually(lambda: _answers(f"{base}/readyz"), timeout=60, interval=0.2)
        assert ready, web_log.read_text()
        yield base, tmp_path, {"web": web_log, "worker": worker_log}
    finally:
        stop(web, worker)


def _answers(url: str) -> bool:
    try:
        return call(url)[0] == 200
    except OSError:
        return False


def test_a_fact_said_through_the_web_comes_back_by_meaning_with_only_the_stores_shared(
    dynos, upstream
):
    base, _, logs = dynos
    status, _, key = call(f"{base}/api/keys", "POST", {"name": "dyno user"}, ADMIN_TOKEN)
    assert status == 201
    settings = {
        "enabled": True,
        "strategy": "semantic",
        "staticEnabled": True,
        "embeddingSource": "static",
    }
    assert call(f"{base}/api/settings/memory", "PUT", settings, ADMIN_TOKEN)[0] == 200
    sdk = openai.OpenAI(base_url=f"{base}/v1", api_key=key["key"], max_retries=0)

    sdk.chat.completions.create(
        model="fake/m", messages=[{"role": "user", "content": "I prefer TypeScript."}]
    )

    def listed() -> list[str]:
        _, _, page = call(f"{base}/api/memory?apiKeyId={key['id']}", token=ADMIN_TOKEN)
        return [memory["content"] for memory in page["data"]]

    # The event is the fact's arrival; the bound only ends a stuck run (the worker may be
    # building the static model first on a busy 2-core machine: 60 s was not enough once).
    assert eventually(lambda: "I prefer TypeScript" in listed(), timeout=240, interval=0.5), logs[
        "worker"
    ].read_text()

    def embedded() -> bool:
        _, _, status = call(f"{base}/api/memory/engine-status", token=ADMIN_TOKEN)
        store = status["vectorStore"]
        return store["backend"] == "pgvector" and store["rowCount"] >= 1

    assert eventually(embedded, timeout=240, interval=1.0), logs["worker"].read_text()

    # No word in common with the fact: only its vector can find it.
    sdk.chat.completions.create(
        model="fake/m",
        messages=[{"role": "user", "content": "Which coding language suits me best?"}],
    )
    system = upstream.last_body["messages"][0]
    assert system["role"] == "system" and "I prefer TypeScript" in system["content"]

    worker_log, web_log = logs["worker"].read_text(), logs["web"].read_text()
    assert "facts" in worker_log, "the worker extracted"
    assert "built into" in worker_log and "kept in the database" in worker_log
    assert "distilling" not in web_log, "the web process built nothing itself"
    assert "Traceback" not in web_log + worker_log


def test_the_worker_answers_its_health_probe_in_engine_status(dynos):
    base, _, _ = dynos

    def workers() -> list:
        _, _, status = call(f"{base}/api/memory/engine-status", token=ADMIN_TOKEN)
        return status["jobs"].get("workers") or []

    found = eventually(workers, timeout=30, interval=0.5)
    assert found and all(worker["lastHeartbeat"] for worker in found), found


@pytest.fixture
def own_redis(tmp_path):
    """A Redis server of this test's own, which it may stop and start again (a restart)."""
    port = free_port()
    command = [
        "redis-server", "--port", str(port), "--bind", "127.0.0.1", "--save", "",
        "--appendonly", "no", "--dir", str(tmp_path),
    ]  # fmt: skip

    def start() -> subprocess.Popen:
        server = subprocess.Popen(command, stdout=subprocess.DEVNULL)
        client = redis.Redis(port=port)
        assert eventually(lambda: _pings(client), timeout=10), "redis-server did not start"
        client.close()
        return server

    servers = [start()]
    yield f"redis://127.0.0.1:{port}/0", servers, start
    for server in servers:
        server.terminate()
        server.wait(timeout=10)


def _pings(client: redis.Redis) -> bool:
    try:
        return client.ping()
    except redis.ConnectionError:
        return False


def test_after_a_redis_restart_the_worker_is_listed_again_and_takes_jobs(
    own_redis, tmp_path, upstream
):
    url, servers, start = own_redis
    app = create_app(
        app_settings(
            tmp_path / "web",
            None,
            REDIS_URL=url,
            DATABASE_URL=f"sqlite:///{tmp_path / 'shared.db'}",
            OMNIROUTE_PROVIDERS=[{"id": "fake", "baseUrl": upstream.base_url, "models": ["m"]}],
        )
    )
    svc = app.extensions["omniroute"]
    svc.memory_settings.update({"enabled": True})
    env = environment(
        DATA_DIR=str(tmp_path / "worker"),
        REDIS_URL=url,
        DATABASE_URL=f"sqlite:///{tmp_path / 'shared.db'}",
    )
    log_path = tmp_path / "worker.log"
    with log_path.open("w") as log:
        worker = subprocess.Popen(
            [sys.executable, "-m", "flask", "--app", "app", "worker"],
            cwd=ROOT,
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
        )
    try:
        assert eventually(lambda: svc.jobs.status()["workers"], timeout=30), log_path.read_text()
        servers[0].terminate()
        servers[0].wait(timeout=10)
        servers.append(start())  # empty: the registry, like every key, is gone

        # The worker notices at its next pass (RQ's idle wait is under a minute now).
        listed = eventually(lambda: svc.jobs.status()["workers"], timeout=180, interval=0.5)
        assert listed and listed[0]["lastHeartbeat"], log_path.read_text()
        # Its scheduler, which died with the connection, is back: a delayed job runs.
        mark = tmp_path / "delayed"
        Queue(DEFAULT_QUEUE, connection=redis.Redis.from_url(url)).enqueue_in(
            timedelta(seconds=1), leaves_a_mark, str(mark)
        )
        assert eventually(mark.exists, timeout=120), log_path.read_text()
        key, secret = svc.keys.create("after the restart")
        response = app.test_client().post(
            "/v1/chat/completions",
            json={"model": "fake/m", "messages": [{"role": "user", "content": "I prefer Zig."}]},
            headers={"Authorization": f"Bearer {secret}"},
        )
        assert response.status_code == 200
        stored = eventually(
            lambda: [m.key for m in svc.memories.find(MemoryFilter(api_key_id=key.id))],
            timeout=30,
        )
        assert stored == ["preference:zig"], log_path.read_text()
        assert worker.poll() is None
    finally:
        stopped_in_time = stop(worker)
        svc.close()
    assert stopped_in_time, log_path.read_text()
