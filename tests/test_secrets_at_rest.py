"""Secrets at rest: the database is private to its owner, provider keys are sealed in it."""

from __future__ import annotations

import os
import stat

from sqlalchemy import insert

from omniroute.core.db.tables import providers
from omniroute.factory import create_app
from tests.helpers import ADMIN_TOKEN

ADMIN = {"Authorization": f"Bearer {ADMIN_TOKEN}"}
PROVIDER = {"id": "up", "baseUrl": "https://api.example.com/v1", "apiKey": "sk-live-9876"}


def mode(path) -> int:
    return stat.S_IMODE(os.stat(path).st_mode)


def stored_key(svc, provider_id: str) -> str:
    with svc.db.read() as conn:
        return conn.exec_driver_sql(
            "SELECT api_key FROM providers WHERE id = ?", (provider_id,)
        ).scalar_one()


def test_the_database_and_its_wal_files_are_0600(app, tmp_path, client):
    client.post("/api/keys", json={"name": "x"}, headers=ADMIN)  # a write makes the WAL
    for name in ("omniroute.db", "omniroute.db-wal", "omniroute.db-shm"):
        assert mode(tmp_path / name) == 0o600, name


def test_an_older_world_readable_database_is_made_private(tmp_path):
    database = tmp_path / "omniroute.db"
    database.touch(mode=0o644)
    os.chmod(database, 0o644)
    app = create_app({"DATA_DIR": str(tmp_path), "OMNIROUTE_ADMIN_TOKEN": ADMIN_TOKEN})
    assert mode(database) == 0o600
    app.extensions["omniroute"].close()


def test_a_provider_key_is_sealed_in_the_database_and_used_in_the_clear(client, svc):
    assert client.post("/api/providers", json=PROVIDER, headers=ADMIN).status_code == 201
    raw = stored_key(svc, "up")
    assert raw.startswith("fernet:") and "sk-live-9876" not in raw
    assert svc.providers.get("up").api_key == "sk-live-9876"
    shown = client.get("/api/providers/up", headers=ADMIN).json["provider"]
    assert shown["apiKeyMasked"] == "...9876" and "apiKey" not in shown
    with open(svc.db.path, "rb") as handle:
        assert b"sk-live-9876" not in handle.read()


def test_keys_stored_in_plain_text_are_sealed_at_start(tmp_path):
    settings = {"DATA_DIR": str(tmp_path), "OMNIROUTE_ADMIN_TOKEN": ADMIN_TOKEN}
    first = create_app(settings)
    svc = first.extensions["omniroute"]
    with svc.db.write() as conn:  # as a version before sealing left it
        conn.execute(
            insert(providers).values(
                id="old",
                base_url="https://api.example.com/v1",
                api_key="sk-plain-1234",
                models="[]",
                embedding_models="[]",
                supports_system_role=1,
                created_at="2026-01-01T00:00:00.000Z",
                updated_at="2026-01-01T00:00:00.000Z",
            )
        )
    svc.close()
    second = create_app(settings)
    again = second.extensions["omniroute"]
    assert stored_key(again, "old").startswith("fernet:")
    assert again.providers.get("old").api_key == "sk-plain-1234"
    assert again.providers.seal_plain_keys() == 0  # idempotent
    again.close()


def test_another_secret_key_cannot_read_sealed_keys(tmp_path):
    settings = {"DATA_DIR": str(tmp_path), "OMNIROUTE_ADMIN_TOKEN": ADMIN_TOKEN}
    first = create_app({**settings, "OMNIROUTE_SECRET_KEY": "one"})
    first.extensions["omniroute"].providers.save(
        "up", {"base_url": "https://api.example.com/v1", "api_key": "sk-live-9876"}
    )
    first.extensions["omniroute"].close()
    second = create_app({**settings, "OMNIROUTE_SECRET_KEY": "two"})
    assert second.extensions["omniroute"].providers.get("up").api_key is None
    second.extensions["omniroute"].close()
