"""Memory backends through the settings API: checked, sealed, applied on PUT, and listed
with their health at GET /api/memory/backends."""

from __future__ import annotations

import pytest

from tests.memory_service import MemoryService

pytestmark = pytest.mark.both_stores


def put(client, admin, **body):
    return client.put("/api/settings/memory", json=body, headers=admin)


def brain(memory_service, **more) -> dict:
    return {"brain": {"baseUrl": memory_service.url, "apiKey": "sk-brain-secret-1234", **more}}


def test_a_backend_is_registered_made_primary_and_listed_with_its_health(
    client, admin, svc, memory_service
):
    answer = put(client, admin, backendConfigs=brain(memory_service, backendType="mem0"),
                 primaryBackend="brain", fallbackBackends=["sqlite"])  # fmt: skip
    assert answer.status_code == 200, answer.json
    assert svc.backends.current().primary.id == "brain", "applied on the PUT"
    listed = client.get("/api/memory/backends", headers=admin).json["data"]
    assert [
        (b["id"], b["backendType"], b["isPrimary"], b["isFallback"], b["health"]["ok"])
        for b in listed
    ] == [("local", "local", False, True, True), ("brain", "mem0", True, False, True)]
    assert memory_service.last["headers"]["Authorization"] == "Bearer sk-brain-secret-1234"


def test_a_backend_api_key_is_sealed_and_shown_masked(client, admin, svc, memory_service):
    put(client, admin, backendConfigs=brain(memory_service))
    shown = client.get("/api/settings/memory", headers=admin).json["backendConfigs"]["brain"]
    assert shown["apiKey"] == "***1234"
    with svc.db.read() as conn:
        stored = " ".join(
            str(v) for row in conn.exec_driver_sql("SELECT * FROM settings") for v in row
        )
    assert "sk-brain-secret-1234" not in stored
    # Sent back as GET showed it, or without apiKey: the stored key stays.
    put(client, admin, backendConfigs={"brain": {**shown, "timeout": 5000}})
    svc.backends.current().backend("brain").health()
    assert memory_service.last["headers"]["Authorization"] == "Bearer sk-brain-secret-1234"


@pytest.mark.parametrize(
    ("body", "field", "status"),
    [
        # Naming a backend that does not exist: well formed, nothing to point at.
        ({"primaryBackend": "nope"}, "primaryBackend", 404),
        ({"fallbackBackends": ["nope"]}, "fallbackBackends", 404),
        ({"backendConfigs": {"brain": {"apiKey": "x"}}}, "backendConfigs.brain.baseUrl", 422),
        ({"backendConfigs": {"brain": {"baseUrl": "http://x", "timeout": 0}}},
         "backendConfigs.brain.timeout", 422),
        ({"backendConfigs": {"brain": {"baseUrl": "http://x", "endpoints": {"nuke": "/"}}}},
         "backendConfigs.brain.endpoints.nuke", 422),
        ({"backendConfigs": {"sqlite": {"baseUrl": "http://x"}}}, "backendConfigs.sqlite", 422),
        ({"backendConfigs": {"": {"baseUrl": "http://x"}}}, "backendConfigs.", 422),
        ({"backendConfigs": {"a b": {"baseUrl": "http://x"}}}, "backendConfigs.a b", 422),
        ({"backendConfigs": {"brain": {"baseUrl": "http://x", "headers": {"X-A": "a\r\nB: c"}}}},
         "backendConfigs.brain.headers.X-A", 422),
        ({"backendConfigs": {"brain": {"baseUrl": "http://x", "headers": {"Ünï": "v"}}}},
         "backendConfigs.brain.headers.Ünï", 422),
        ({"backendConfigs": {"brain": {"baseUrl": "http://x", "backendType": "my mem0\n"}}},
         "backendConfigs.brain.backendType", 422),
    ],
)  # fmt: skip
def test_bad_backend_settings_are_refused_naming_the_field_and_store_nothing(
    client, admin, svc, body, field, status
):
    before = client.get("/api/settings/memory", headers=admin).json
    answer = put(client, admin, **body)
    assert answer.status_code == status
    assert answer.json["error"]["details"][0]["field"] == field
    assert client.get("/api/settings/memory", headers=admin).json == before


def test_an_unreachable_backend_is_listed_unhealthy(client, admin, svc):
    put(client, admin, backendConfigs={"down": {"baseUrl": "http://127.0.0.1:9", "timeout": 500}})
    listed = {b["id"]: b for b in client.get("/api/memory/backends", headers=admin).json["data"]}
    assert listed["local"]["health"]["ok"] and not listed["down"]["health"]["ok"]
    assert "Could not reach down" in listed["down"]["health"]["message"]


def test_another_process_picks_up_a_change_at_its_next_use(client, admin, svc, memory_service):
    manager = svc.backends.current()
    assert manager.primary.id == "local"
    svc.memory_settings.update({"backendConfigs": brain(memory_service), "primaryBackend": "brain"})
    assert svc.backends.current().primary.id == "brain"


@pytest.mark.sqlite_only
def test_obsidian_and_notion_are_registered_from_the_environment(tmp_path, database_url):
    from omniroute.factory import create_app
    from tests.helpers import ADMIN_TOKEN, app_settings
    from tests.obsidian_vault import API_KEY, ObsidianVault

    vault = ObsidianVault().start()
    app = create_app(
        app_settings(
            tmp_path,
            database_url,
            OBSIDIAN_API_URL=vault.url,
            OBSIDIAN_API_KEY=API_KEY,
            NOTION_API_KEY="secret_x",
        )  # fmt: skip
    )
    try:
        client, admin = app.test_client(), {"Authorization": f"Bearer {ADMIN_TOKEN}"}
        listed = {
            b["id"]: b for b in client.get("/api/memory/backends", headers=admin).json["data"]
        }
        assert set(listed) == {"local", "obsidian"}, "notion needs NOTION_DATABASE_ID too"
        assert listed["obsidian"]["health"]["ok"]
        assert put(client, admin, primaryBackend="obsidian").status_code == 200
        assert app.extensions["omniroute"].backends.current().primary.id == "obsidian"
    finally:
        app.extensions["omniroute"].close()
        vault.stop()


def test_a_removed_backend_is_gone_at_once_and_never_asked_again(
    client, admin, svc, memory_service
):
    put(client, admin, backendConfigs=brain(memory_service), primaryBackend="brain")
    assert [b["id"] for b in client.get("/api/memory/backends", headers=admin).json["data"]] == [
        "local", "brain"
    ]  # fmt: skip
    answer = put(client, admin, backendConfigs={}, primaryBackend="local")
    assert answer.status_code == 200, answer.json
    asked = len(memory_service.requests)
    listed = client.get("/api/memory/backends", headers=admin).json["data"]
    assert [b["id"] for b in listed] == ["local"]
    assert client.get("/api/memory", headers=admin).json["backend"] == "local"
    assert len(memory_service.requests) == asked, "its key is never sent again"


def test_a_backend_moved_to_another_url_is_asked_there_only(client, admin, svc, memory_service):
    put(client, admin, backendConfigs=brain(memory_service), primaryBackend="brain")
    moved = MemoryService().start()
    try:
        put(client, admin, backendConfigs=brain(moved))
        asked = len(memory_service.requests)
        client.get("/api/memory/backends", headers=admin)
        client.get("/api/memory?apiKeyId=k", headers=admin)
        assert len(memory_service.requests) == asked and len(moved.requests) >= 2
    finally:
        moved.stop()


def test_a_new_url_needs_the_backend_key_again(client, admin, svc, memory_service):
    put(client, admin, backendConfigs=brain(memory_service))
    elsewhere = "http://127.0.0.1:9/elsewhere"
    for key in ({}, {"apiKey": "***1234"}, {"apiKey": None}):
        answer = put(client, admin, backendConfigs={"brain": {"baseUrl": elsewhere, **key}})
        assert answer.status_code == 409, answer.json  # fine alone, not with the stored key
        detail = answer.json["error"]["details"][0]
        assert detail["field"] == "backendConfigs.brain.apiKey"
        assert "send the API key again" in detail["message"]
    assert svc.backends.current().backend("brain").health().ok, "the old config still serves"
    assert memory_service.last["headers"]["Authorization"] == "Bearer sk-brain-secret-1234"
    answer = put(client, admin, backendConfigs={"brain": {"baseUrl": elsewhere, "apiKey": ""}})
    assert answer.status_code == 200
    assert "apiKey" not in client.get("/api/settings/memory", headers=admin).json[
        "backendConfigs"]["brain"]  # fmt: skip


@pytest.mark.parametrize(
    "url",
    ["file:///etc/passwd", "gopher://127.0.0.1:6379/_FLUSHALL", "http://169.254.169.254/latest",
     "http://metadata.google.internal/", "http://0xa9fea9fe/", "http://user:pw@example.com"],
)  # fmt: skip
def test_a_backend_url_the_outbound_guard_refuses_is_not_saved(client, admin, url):
    before = client.get("/api/settings/memory", headers=admin).json
    answer = put(client, admin, backendConfigs={"evil": {"baseUrl": url}}, primaryBackend="evil")
    assert answer.status_code == 422
    assert answer.json["error"]["details"][0]["field"] == "backendConfigs.evil.baseUrl"
    assert client.get("/api/settings/memory", headers=admin).json == before
    assert client.get("/api/memory", headers=admin).status_code == 200
