import os
from pathlib import Path

import pytest

from omniroute.factory import create_app
from tests.helpers import ADMIN_TOKEN, REDIS_TEST_URL, app_settings

pytestmark = pytest.mark.both_stores


@pytest.fixture
def app_with_redis(tmp_path):
    def make(redis_url: str):
        return create_app(
            {
                "DATA_DIR": str(tmp_path),
                "OMNIROUTE_ADMIN_TOKEN": ADMIN_TOKEN,
                "REDIS_URL": redis_url,
            }
        )

    return make


def test_healthz_answers_without_auth(client):
    response = client.get("/healthz")
    assert response.status_code == 200 and response.json == {"status": "ok"}


def test_readyz_without_redis_checks_the_database(client, svc):
    response = client.get("/readyz")
    assert response.status_code == 200
    checks = response.json["checks"]
    assert checks["database"] == "ok"
    assert checks["redis"].startswith("not configured")
    assert checks["vectors"] == svc.db.vectors.label
    assert checks["vectors"].startswith(("sqlite-vec v", "pgvector 0."))


def test_readyz_pings_a_configured_redis(app_with_redis):
    response = app_with_redis(REDIS_TEST_URL).test_client().get("/readyz")
    assert response.status_code == 200
    assert response.json["checks"]["redis"] == "ok"


def test_readyz_stays_ready_and_reports_redis_when_it_is_down(app_with_redis):
    # Jobs then run in this process: a load balancer must not pull every instance for it.
    response = app_with_redis("redis://127.0.0.1:1/0").test_client().get("/readyz")
    assert response.status_code == 200
    assert response.json["status"] == "ready"
    assert response.json["checks"]["redis"].startswith("unavailable (jobs run in-process)")


@pytest.mark.sqlite_only
@pytest.mark.parametrize("pooled", [False, True], ids=["closed", "pooled"])
def test_readyz_is_503_when_the_database_is_unreadable(client, svc, pooled):
    """Also under a pooled connection, which in WAL mode answers from its cache."""
    if pooled:
        assert client.get("/readyz").status_code == 200  # the pool now holds a connection
    else:
        svc.db.dispose()
    for suffix in ("-wal", "-shm"):
        Path(svc.db.path + suffix).unlink(missing_ok=True)
    # Replaced whole: written in place, the file is empty for a moment, and a background
    # thread that connects then finds a valid empty database and writes its header.
    garbage = Path(svc.db.path + ".garbage")
    garbage.write_bytes(b"this is not a database" * 100)
    os.replace(garbage, svc.db.path)
    response = client.get("/readyz")
    assert response.status_code == 503
    assert [d["field"] for d in response.json["error"]["details"]] == ["database"]


def test_readyz_is_503_when_postgresql_is_gone(tmp_path, system_postgres):
    app = create_app(app_settings(tmp_path, system_postgres.url))
    assert app.test_client().get("/readyz").status_code == 200
    system_postgres.drop()  # the server ends every session of that database
    response = app.test_client().get("/readyz")
    assert response.status_code == 503
    assert [d["field"] for d in response.json["error"]["details"]] == ["database"]
    app.extensions["omniroute"].close()
