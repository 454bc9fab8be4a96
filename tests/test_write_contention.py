"""Writers wait their turn; past the bound a request gets 503 with Retry-After, never 500."""

from __future__ import annotations

import threading
import time
from concurrent.futures import ThreadPoolExecutor

import pysqlite3.dbapi2 as sqlite3
import pytest

from omniroute.factory import create_app
from tests.helpers import ADMIN_TOKEN

ADMIN = {"Authorization": f"Bearer {ADMIN_TOKEN}"}


def make_app(data_dir, **config):
    return create_app({"DATA_DIR": str(data_dir), "OMNIROUTE_ADMIN_TOKEN": ADMIN_TOKEN, **config})


def test_a_write_held_off_past_its_bound_is_a_503_with_retry_after(tmp_path):
    app = make_app(tmp_path, DB_WRITE_WAIT_SECONDS=0.5)
    svc = app.extensions["omniroute"]
    key, _ = svc.keys.create("k")
    client = app.test_client()
    holder = sqlite3.connect(str(tmp_path / "omniroute.db"), isolation_level=None)
    holder.execute("BEGIN IMMEDIATE")  # another process holding the write lock
    try:
        started = time.monotonic()
        response = client.post(
            "/api/memory", json={"apiKeyId": key.id, "key": "k", "content": "x"}, headers=ADMIN
        )
        waited = time.monotonic() - started
    finally:
        holder.rollback()
        holder.close()
    assert response.status_code == 503, response.json
    assert response.headers["Retry-After"] == "1"
    assert response.json["error"]["type"] == "service_unavailable"
    assert "busy" in response.json["error"]["message"]
    assert waited >= 0.5, "it waited its turn first"
    retried = client.post(
        "/api/memory", json={"apiKeyId": key.id, "key": "k", "content": "x"}, headers=ADMIN
    )
    assert retried.status_code == 201
    assert retried.json["created"] is True  # the refused write left nothing behind
    svc.close()


@pytest.mark.slow
def test_two_web_processes_on_one_file_answer_every_writer_and_lose_nothing(tmp_path):
    # Two apps, two engines, one SQLite file: as two web processes on one data dir.
    apps = [make_app(tmp_path), make_app(tmp_path)]
    key, _ = apps[0].extensions["omniroute"].keys.create("k")
    statuses: list[int] = []
    lock = threading.Lock()
    stop = time.monotonic() + 4

    def writer(number: int) -> None:
        client = apps[number % 2].test_client()
        count = 0
        while time.monotonic() < stop:
            body = {"apiKeyId": key.id, "key": f"w{number}-{count}", "content": f"fact {count}"}
            status = client.post("/api/memory", json=body, headers=ADMIN).status_code
            with lock:
                statuses.append(status)
            count += 1

    with ThreadPoolExecutor(20) as pool:
        list(pool.map(writer, range(20)))
    assert set(statuses) <= {201, 503}, sorted(set(statuses))
    listed = apps[1].test_client().get("/api/memory?limit=1", headers=ADMIN).json
    assert listed["total"] == statuses.count(201)
    for app in apps:
        app.extensions["omniroute"].close()
