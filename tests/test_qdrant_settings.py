"""/api/settings/qdrant: defaults, QDRANT_* fallbacks, the sealed key, validation, and the
refusal of local mode beside a separate worker."""

from __future__ import annotations

import json
import re
from pathlib import Path

import click
import pytest
from sqlalchemy import select

from omniroute.api.qdrant import QdrantSettingsUpdateSchema
from omniroute.core.db.tables import settings as settings_table
from omniroute.factory import create_app
from omniroute.jobs.worker import run_worker
from tests.fake_qdrant import FakeQdrant
from tests.helpers import REDIS_TEST_URL, app_settings
from tests.qdrant_helpers import ADMIN

pytestmark = pytest.mark.both_stores
ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture
def configured(tmp_path, database_url):
    """An app made with the given QDRANT_* settings."""
    made = []

    def make(**env):
        app = create_app(app_settings(tmp_path, database_url, **env))
        made.append(app)
        return app.test_client()

    yield make
    for app in made:
        app.extensions["omniroute"].close()


def test_get_shows_the_defaults(client):
    assert client.get("/api/settings/qdrant", headers=ADMIN).json == {
        "enabled": False,
        "mode": "server",
        "host": "",
        "port": 6333,
        "url": None,
        "path": None,
        "collection": "omniroute_memory",
        "embeddingModel": None,
        "quantization": "none",
        "vectorSize": None,
        "hnswEfConstruct": 128,
        "hasApiKey": False,
        "apiKeyMasked": None,
    }


@pytest.mark.parametrize(
    ("env", "url"),
    [
        ({"QDRANT_URL": "https://qdrant.example.com"}, "https://qdrant.example.com:6333"),
        ({"QDRANT_URL": "https://q.example.com:443"}, "https://q.example.com:443"),
        ({"QDRANT_HOST": "qdrant", "QDRANT_PORT": 7000}, "http://qdrant:7000"),
        ({"QDRANT_HOST": "10.0.0.5"}, "http://10.0.0.5:6333"),
    ],
)
def test_the_environment_gives_the_server(configured, env, url):
    shown = configured(**env).get("/api/settings/qdrant", headers=ADMIN).json
    assert shown["url"] == url


def test_stored_settings_win_over_the_environment(configured):
    client = configured(
        QDRANT_HOST="env-host", QDRANT_COLLECTION="env_collection", QDRANT_API_KEY="env-key-0001"
    )
    shown = client.get("/api/settings/qdrant", headers=ADMIN).json
    assert (shown["host"], shown["collection"], shown["apiKeyMasked"]) == (
        "env-host",
        "env_collection",
        "***0001",
    )
    shown = client.put(
        "/api/settings/qdrant",
        json={"host": "qdrant.internal", "port": 6334, "collection": "mine", "apiKey": "qk-9876"},
        headers=ADMIN,
    ).json
    assert shown["url"] == "http://qdrant.internal:6334"
    assert (shown["collection"], shown["apiKeyMasked"]) == ("mine", "***9876")


def test_vector_size_and_ef_construct_come_from_the_environment_until_stored(configured):
    client = configured(QDRANT_VECTOR_SIZE=512, QDRANT_HNSW_EF_CONSTRUCT=64)
    shown = client.get("/api/settings/qdrant", headers=ADMIN).json
    assert (shown["vectorSize"], shown["hnswEfConstruct"]) == (512, 64)
    body = {"vectorSize": 256, "hnswEfConstruct": 200}
    shown = client.put("/api/settings/qdrant", json=body, headers=ADMIN).json
    assert (shown["vectorSize"], shown["hnswEfConstruct"]) == (256, 200)
    shown = client.put("/api/settings/qdrant", json={"vectorSize": None}, headers=ADMIN).json
    assert shown["vectorSize"] == 512, "null gives the environment's (or the model's) size back"


def test_the_api_key_is_sealed_at_rest_shown_masked_and_removed_by_empty(client, svc):
    secret = "qdrant-secret-key-4321"
    response = client.put("/api/settings/qdrant", json={"apiKey": secret}, headers=ADMIN)
    assert response.json["hasApiKey"] is True and response.json["apiKeyMasked"] == "***4321"
    with svc.db.read() as conn:
        stored = conn.execute(
            select(settings_table.c.value).where(settings_table.c.key == "qdrantApiKey")
        ).scalar_one()
    assert secret not in stored and json.loads(stored).startswith("fernet:")
    assert secret not in client.get("/api/memory/engine-status", headers=ADMIN).text
    assert svc.qdrant.sync.settings.get().api_key == secret
    shown = client.put("/api/settings/qdrant", json={"apiKey": ""}, headers=ADMIN).json
    assert shown["hasApiKey"] is False and shown["apiKeyMasked"] is None


def test_a_new_server_needs_the_key_again(configured, svc):
    client = configured(QDRANT_HOST="env-host", QDRANT_API_KEY="env-key-0001")
    for body in ({"host": "other-host"}, {"port": 7000, "apiKey": "***0001"}):
        answer = client.put("/api/settings/qdrant", json=body, headers=ADMIN)
        assert answer.status_code == 409, answer.json
        assert answer.json["error"]["details"][0]["field"] == "apiKey"
    shown = client.put(
        "/api/settings/qdrant", json={"host": "other-host", "apiKey": ""}, headers=ADMIN
    ).json
    assert shown["url"] == "http://other-host:6333" and not shown["hasApiKey"], (
        "the environment's key stays with the environment's server"
    )
    client.put("/api/settings/qdrant", json={"apiKey": "qk-stored-5555"}, headers=ADMIN)
    kept = client.put("/api/settings/qdrant", json={"collection": "c2", "apiKey": "***5555"},
                      headers=ADMIN)  # fmt: skip
    assert kept.status_code == 200 and kept.json["apiKeyMasked"] == "***5555"
    moved = client.put("/api/settings/qdrant", json={"host": "third-host"}, headers=ADMIN)
    assert moved.status_code == 409


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"host": "169.254.169.254"}, "host"),
        ({"host": "http://metadata.google.internal"}, "host"),
        ({"host": "ftp://qdrant.example.com"}, "host"),
        ({"host": "http://user:pw@qdrant.example.com"}, "host"),
        ({"host": "qdrant\r\nX-Evil: 1"}, "host"),
        ({"port": 70000}, "port"),
        ({"port": "6333"}, "port"),
        ({"port": True}, "port"),
        ({"quantization": "fp16"}, "quantization"),
        ({"collection": "../admin"}, "collection"),
        ({"collection": ""}, "collection"),
        ({"enabled": "yes"}, "enabled"),
        ({"apiKey": "a\nb"}, "apiKey"),
        ({"vectorSize": 0}, "vectorSize"),
        ({"vectorSize": "512"}, "vectorSize"),
        ({"vectorSize": 65537}, "vectorSize"),
        ({"hnswEfConstruct": 3}, "hnswEfConstruct"),
        ({"hnswEfConstruct": 4097}, "hnswEfConstruct"),
        ({"hnswEfConstruct": None}, "hnswEfConstruct"),
    ],
)
def test_bad_values_are_refused_naming_the_field_and_nothing_is_stored(client, body, field):
    before = client.get("/api/settings/qdrant", headers=ADMIN).json
    response = client.put("/api/settings/qdrant", json=body, headers=ADMIN)
    assert response.status_code == 422, response.json
    assert [detail["field"] for detail in response.json["error"]["details"]] == [field]
    assert client.get("/api/settings/qdrant", headers=ADMIN).json == before


def test_enabling_a_server_that_is_not_there_is_refused(client, svc):
    response = client.put(
        "/api/settings/qdrant", json={"enabled": True, "host": "http://127.0.0.1:9"}, headers=ADMIN
    )
    assert response.status_code == 409, "well formed; it may work once Qdrant is up"
    assert "could not reach Qdrant at http://127.0.0.1:9" in response.json["error"]["message"]
    assert response.json["error"]["details"][0]["field"] == "enabled"
    assert svc.qdrant.sync.settings.get().enabled is False
    assert svc.memory_settings.get().vector_store == "auto"


def test_enabling_without_an_embedding_source_is_refused(configured):
    fake = FakeQdrant().start()
    try:
        client = configured(QDRANT_URL=fake.url)
        svc = client.application.extensions["omniroute"]
        svc.memory_settings.update({"staticEnabled": False})  # no embedder yet
        refused = client.put("/api/settings/qdrant", json={"enabled": True}, headers=ADMIN)
        assert refused.status_code == 409
        assert "no embedding source for Qdrant" in refused.json["error"]["message"]
    finally:
        fake.stop()


def test_the_health_route_reports_a_server_that_is_not_configured(client):
    found = client.get("/api/settings/qdrant/health", headers=ADMIN).json
    assert found["ok"] is False and "not configured" in found["error"]


def test_local_mode_beside_a_separate_worker_is_refused_at_start(tmp_path, database_url):
    app = create_app(
        app_settings(
            tmp_path, database_url, REDIS_URL=REDIS_TEST_URL, QDRANT_PATH=str(tmp_path / "q")
        )
    )
    try:
        with pytest.raises(click.UsageError, match="needs a Qdrant server"):
            run_worker(app)
    finally:
        app.extensions["omniroute"].close()


def test_the_readme_lists_every_qdrant_setting_the_api_takes():
    readme = (ROOT / "docs" / "deployment.md").read_text(encoding="utf-8")
    listed = re.findall(r"^\| `(\w+)` \| `qdrant\w+` \|", readme, flags=re.MULTILINE)
    assert listed == list(QdrantSettingsUpdateSchema().fields)
