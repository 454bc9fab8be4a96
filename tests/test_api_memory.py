import json
from datetime import UTC, datetime, timedelta

import pytest

from omniroute.core.clock import to_iso

pytestmark = pytest.mark.both_stores


def details(response) -> dict[str, str]:
    """Field -> message of an error response (the first message per field)."""
    result = {}
    for detail in response.json["error"]["details"]:
        result.setdefault(detail["field"], detail["message"])
    return result


@pytest.fixture
def add(client, admin, api_key):
    def add(**fields) -> dict:
        body = {"apiKeyId": api_key["id"], "key": "k", "content": "c", **fields}
        response = client.post("/api/memory", json=body, headers=admin)
        assert response.status_code == 201, response.json
        return response.json["memory"]

    return add


# -- auth -------------------------------------------------------------------------------

ROUTES = [
    ("GET", "/api/memory"),
    ("POST", "/api/memory"),
    ("GET", "/api/memory/health"),
    ("GET", "/api/memory/some-id"),
    ("PUT", "/api/memory/some-id"),
    ("DELETE", "/api/memory/some-id"),
    ("GET", "/api/memory/some-id/history"),
    ("GET", "/api/keys"),
    ("POST", "/api/keys"),
    ("DELETE", "/api/keys/some-id"),
    ("GET", "/api/settings/memory"),
    ("PUT", "/api/settings/memory"),
    ("GET", "/api/settings/gateway"),
    ("PUT", "/api/settings/gateway"),
    ("GET", "/api/providers"),
    ("POST", "/api/providers"),
    ("GET", "/api/providers/some-id"),
    ("PUT", "/api/providers/some-id"),
    ("DELETE", "/api/providers/some-id"),
    ("POST", "/api/memory/retrieve-preview"),
    ("GET", "/api/memory/engine-status"),
    ("GET", "/api/memory/embedding-providers"),
    ("POST", "/api/memory/reindex"),
    ("GET", "/api/memory/export"),
    ("POST", "/api/memory/import"),
    ("GET", "/api/no-such-route"),
]


@pytest.mark.parametrize(("method", "path"), ROUTES)
def test_every_api_route_needs_credentials(client, method, path):
    response = client.open(path, method=method, json={})
    assert response.status_code == 401
    assert response.json["error"]["type"] == "authentication_error"
    assert response.headers["WWW-Authenticate"].lower().startswith("bearer")


@pytest.mark.parametrize(("method", "path"), ROUTES)
def test_every_api_route_refuses_a_wrong_token(client, method, path):
    response = client.open(path, method=method, json={}, headers={"Authorization": "Bearer no"})
    assert response.status_code == 403
    assert response.json["error"]["type"] == "permission_error"


def test_a_gateway_key_is_not_an_admin_token(client, api_key):
    response = client.get("/api/memory", headers={"Authorization": f"Bearer {api_key['key']}"})
    assert response.status_code == 403


def test_other_schemes_count_as_missing_credentials(client):
    response = client.get("/api/memory", headers={"Authorization": "Basic YWRtaW46YWRtaW4="})
    assert response.status_code == 401


# -- create -----------------------------------------------------------------------------


def test_create_returns_201_with_the_memory(client, admin, api_key):
    expires = to_iso(datetime.now(UTC) + timedelta(days=1))
    response = client.post(
        "/api/memory",
        json={
            "apiKeyId": api_key["id"],
            "key": "pref:editor",
            "content": "Uses Neovim",
            "type": "procedural",
            "sessionId": "s1",
            "metadata": {"source": "manual"},
            "expiresAt": expires,
        },
        headers=admin,
    )
    assert response.status_code == 201
    assert response.json["created"] is True
    memory = response.json["memory"]
    assert {k: memory[k] for k in ("apiKeyId", "key", "content", "type", "sessionId")} == {
        "apiKeyId": api_key["id"],
        "key": "pref:editor",
        "content": "Uses Neovim",
        "type": "procedural",
        "sessionId": "s1",
    }
    assert memory["metadata"] == {"source": "manual"}
    assert memory["expiresAt"] == expires
    assert memory["accessCount"] == 0 and memory["lastAccessedAt"] is None


def test_create_fills_the_defaults(add):
    memory = add()
    assert (memory["type"], memory["sessionId"], memory["metadata"]) == ("factual", "", {})
    assert memory["expiresAt"] is None


def test_create_on_an_existing_key_updates_and_merges(client, admin, api_key, add):
    first = add(key="k", content="old", metadata={"a": 1})
    response = client.post(
        "/api/memory",
        json={"apiKeyId": api_key["id"], "key": "k", "content": "new", "metadata": {"b": 2}},
        headers=admin,
    )
    assert response.status_code == 201
    assert response.json["created"] is False
    assert response.json["memory"]["id"] == first["id"]
    assert response.json["memory"]["metadata"] == {"a": 1, "b": 2}


def test_a_naive_expiry_is_taken_as_utc(add):
    naive = (datetime.now(UTC) + timedelta(days=2)).replace(tzinfo=None, microsecond=0)
    memory = add(expiresAt=naive.isoformat())
    assert memory["expiresAt"] == naive.isoformat() + ".000Z"


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"content": None}, "content"),
        ({"content": ""}, "content"),
        ({"content": "   "}, "content"),
        ({"content": 42}, "content"),
        ({"key": ""}, "key"),
        ({"key": "x" * 257}, "key"),
        ({"type": "opinion"}, "type"),
        ({"metadata": ["not", "an", "object"]}, "metadata"),
        ({"expiresAt": "next tuesday"}, "expiresAt"),
        ({"expiresAt": "2001-01-01T00:00:00Z"}, "expiresAt"),
        ({"contnet": "typo"}, "contnet"),
    ],
)
def test_create_refuses_bad_fields_naming_them(client, admin, api_key, body, field):
    payload = {"apiKeyId": api_key["id"], "key": "k", "content": "c", **body}
    payload = {name: value for name, value in payload.items() if value is not None}
    response = client.post("/api/memory", json=payload, headers=admin)
    assert response.status_code == 422, response.json
    assert field in details(response), response.json
    assert field in response.json["error"]["message"]
    assert client.get("/api/memory", headers=admin).json["total"] == 0


@pytest.mark.parametrize("revoked", [True, False])
def test_create_for_a_key_that_is_gone_or_never_was_is_a_404_naming_apikeyid(
    client, admin, api_key, revoked
):
    key_id = api_key["id"] if revoked else "no-such-key"
    if revoked:
        client.delete(f"/api/keys/{key_id}", headers=admin)
    response = client.post(
        "/api/memory", json={"apiKeyId": key_id, "key": "k", "content": "c"}, headers=admin
    )
    assert response.status_code == 404
    assert "apiKeyId" in details(response)
    assert response.json["error"]["message"].startswith("Not found: apiKeyId: ")
    assert client.get("/api/memory", headers=admin).json["total"] == 0


def test_non_finite_numbers_in_metadata_are_refused(client, admin, api_key):
    body = json.dumps({"apiKeyId": api_key["id"], "key": "k", "content": "c", "metadata": {}})
    response = client.post(
        "/api/memory",
        data=body.replace('"metadata": {}', '"metadata": {"x": NaN}'),
        content_type="application/json",
        headers=admin,
    )
    assert response.status_code == 422
    assert "metadata.x" in details(response)


def test_a_body_that_is_not_an_object_is_refused(client, admin):
    response = client.post("/api/memory", json=["a", "list"], headers=admin)
    assert response.status_code == 422
    assert "body" in details(response)


def test_malformed_json_is_a_400(client, admin):
    response = client.post(
        "/api/memory", data='{"key": ', content_type="application/json", headers=admin
    )
    assert response.status_code == 400
    assert response.json["error"]["type"] == "invalid_request_error"
    assert "JSON" in response.json["error"]["message"]


# -- list -------------------------------------------------------------------------------


def test_list_honours_page_and_offset(client, admin, add):
    for number in range(5):
        add(key=f"k{number}", content=f"memory {number}")
    page2 = client.get("/api/memory?limit=2&page=2", headers=admin).json
    assert [m["content"] for m in page2["data"]] == ["memory 2", "memory 1"]
    assert (page2["page"], page2["limit"], page2["total"], page2["totalPages"]) == (2, 2, 5, 3)
    by_offset = client.get("/api/memory?limit=2&page=1&offset=4", headers=admin).json
    assert [m["content"] for m in by_offset["data"]] == ["memory 0"]
    assert by_offset["page"] == 3


def test_list_filters_and_reports_stats(client, admin, make_key, add):
    other = make_key("other")
    add(key="a", content="Likes 100% dark chocolate", type="factual")
    add(key="b", content="Picked FastAPI", type="episodic", sessionId="s9")
    client.post(
        "/api/memory",
        json={"apiKeyId": other["id"], "key": "a", "content": "Other's chocolate"},
        headers=admin,
    )
    assert client.get("/api/memory", headers=admin).json["total"] == 3
    mine = client.get(f"/api/memory?apiKeyId={other['id']}", headers=admin).json
    assert [m["content"] for m in mine["data"]] == ["Other's chocolate"]
    assert client.get("/api/memory?q=100%25", headers=admin).json["total"] == 1
    assert client.get("/api/memory?q=CHOCOLATE", headers=admin).json["total"] == 2
    assert client.get("/api/memory?sessionId=s9", headers=admin).json["total"] == 1
    stats = client.get("/api/memory?type=episodic", headers=admin).json["stats"]
    assert stats["total"] == 1 and stats["byType"] == {"episodic": 1}
    assert stats["tokensUsed"] == 4  # ceil(len("Picked FastAPI") / 4)
    assert stats["hitRate"] == 0.0
    assert set(stats["cacheStats"]) == {"hits", "misses"}


def test_hit_rate_is_the_share_of_memories_ever_injected(client, admin, svc, add):
    used = add(key="a")
    add(key="b")
    svc.memories.record_access({used["id"]: 1})
    assert client.get("/api/memory", headers=admin).json["stats"]["hitRate"] == 0.5


@pytest.mark.parametrize(
    ("query", "field"),
    [
        ("page=0", "page"),
        ("limit=0", "limit"),
        ("limit=201", "limit"),
        ("offset=-1", "offset"),
        ("type=opinion", "type"),
        ("page=two", "page"),
    ],
)
def test_list_refuses_bad_parameters_naming_them(client, admin, query, field):
    response = client.get(f"/api/memory?{query}", headers=admin)
    assert response.status_code == 422
    assert field in details(response)


# -- get, update, delete ----------------------------------------------------------------


def test_get_returns_the_memory_or_404(client, admin, add):
    memory = add()
    assert client.get(f"/api/memory/{memory['id']}", headers=admin).json == {"memory": memory}
    missing = client.get("/api/memory/nope", headers=admin)
    assert missing.status_code == 404
    assert missing.json["error"]["type"] == "not_found_error"


def test_an_expired_memory_is_not_found(client, admin, svc, api_key):
    memory, _ = svc.memories.create(
        api_key_id=api_key["id"], key="k", content="c", expires_at="2000-01-01T00:00:00.000Z"
    )
    assert client.get(f"/api/memory/{memory.id}", headers=admin).status_code == 404
    assert client.get("/api/memory", headers=admin).json["total"] == 0


def test_put_changes_the_given_fields(client, admin, add):
    memory = add(metadata={"a": 1}, sessionId="s1")
    response = client.put(
        f"/api/memory/{memory['id']}",
        json={"content": "changed", "type": "semantic", "metadata": {"b": 2}},
        headers=admin,
    )
    assert response.status_code == 200
    assert response.json["success"] is True
    updated = response.json["memory"]
    assert (updated["content"], updated["type"], updated["metadata"]) == (
        "changed",
        "semantic",
        {"b": 2},
    )
    assert (updated["key"], updated["sessionId"]) == ("k", "s1")
    assert client.get(f"/api/memory/{memory['id']}", headers=admin).json["memory"] == updated


def test_put_with_a_null_expiry_makes_a_memory_permanent(client, admin, add):
    memory = add(expiresAt=to_iso(datetime.now(UTC) + timedelta(hours=1)))
    response = client.put(f"/api/memory/{memory['id']}", json={"expiresAt": None}, headers=admin)
    assert response.json["memory"]["expiresAt"] is None


def test_put_to_a_key_in_use_is_a_409_naming_key(client, admin, add):
    add(key="taken")
    memory = add(key="free")
    response = client.put(f"/api/memory/{memory['id']}", json={"key": "taken"}, headers=admin)
    assert response.status_code == 409
    assert "key" in details(response)


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({}, "body"),
        ({"content": ""}, "content"),
        ({"apiKeyId": "x"}, "apiKeyId"),
        ({"type": "x"}, "type"),
    ],
)
def test_put_refuses_bad_bodies(client, admin, add, body, field):
    memory = add()
    response = client.put(f"/api/memory/{memory['id']}", json=body, headers=admin)
    assert response.status_code == 422
    assert field in details(response)


def test_put_of_an_unknown_memory_is_a_404(client, admin):
    response = client.put("/api/memory/nope", json={"content": "x"}, headers=admin)
    assert response.status_code == 404


def test_delete_removes_the_memory(client, admin, add):
    memory = add()
    response = client.delete(f"/api/memory/{memory['id']}", headers=admin)
    assert response.status_code == 200 and response.json == {"success": True}
    assert client.get(f"/api/memory/{memory['id']}", headers=admin).status_code == 404
    assert client.delete(f"/api/memory/{memory['id']}", headers=admin).status_code == 404


def test_history_lists_every_change(client, admin, add):
    memory = add(content="one")
    client.put(f"/api/memory/{memory['id']}", json={"content": "two"}, headers=admin)
    client.delete(f"/api/memory/{memory['id']}", headers=admin)
    entries = client.get(f"/api/memory/{memory['id']}/history", headers=admin).json["data"]
    assert [(e["action"], e["oldContent"], e["newContent"]) for e in entries] == [
        ("create", None, "one"),
        ("update", "one", "two"),
        ("delete", "two", None),
    ]
    assert client.get("/api/memory/nope/history", headers=admin).status_code == 404


# -- health -----------------------------------------------------------------------------
