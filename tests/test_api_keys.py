import pytest

from omniroute.core.keys import hash_secret

pytestmark = pytest.mark.both_stores


def test_create_returns_the_secret_once(client, admin):
    response = client.post("/api/keys", json={"name": "laptop"}, headers=admin)
    assert response.status_code == 201
    key = response.json
    assert set(key) == {"id", "name", "key", "prefix", "createdAt", "lastUsedAt", "scopes"}
    assert key["name"] == "laptop"
    assert key["scopes"] == ["read:memory", "write:memory"], "both by default"
    assert key["key"].startswith("sk-omr-") and len(key["key"]) > 40
    assert key["key"].startswith(key["prefix"])
    listed = client.get("/api/keys", headers=admin).json["data"]
    assert listed == [{k: v for k, v in key.items() if k != "key"}]


def test_only_a_hash_of_the_secret_is_stored(client, admin, svc, api_key):
    with svc.db.read() as conn:
        rows = conn.exec_driver_sql("SELECT * FROM api_keys").all()
    flat = " ".join(str(value) for row in rows for value in row)
    assert api_key["key"] not in flat
    assert hash_secret(api_key["key"]) in flat


def test_authenticate_accepts_the_secret_and_records_use(svc, api_key):
    key = svc.keys.authenticate(api_key["key"])
    assert key is not None and key.id == api_key["id"]
    assert svc.keys.get(api_key["id"]).last_used_at is not None


@pytest.mark.parametrize("secret", ["", "sk-omr-", "sk-omr-wrong", "not-even-a-key"])
def test_authenticate_refuses_anything_else(svc, api_key, secret):
    assert svc.keys.authenticate(secret) is None


def test_revoke_stops_a_key(client, admin, svc, api_key):
    response = client.delete(f"/api/keys/{api_key['id']}", headers=admin)
    assert response.status_code == 200 and response.json == {"success": True}
    assert svc.keys.authenticate(api_key["key"]) is None
    assert client.get("/api/keys", headers=admin).json["data"] == []
    again = client.delete(f"/api/keys/{api_key['id']}", headers=admin)
    assert again.status_code == 404


@pytest.mark.parametrize(
    "body", [{}, {"name": ""}, {"name": "  "}, {"name": 7}, {"name": "x" * 101}]
)
def test_create_refuses_a_bad_name(client, admin, body):
    response = client.post("/api/keys", json=body, headers=admin)
    assert response.status_code == 422
    assert response.json["error"]["details"][0]["field"] == "name"


def test_a_key_is_made_read_only_and_given_write_back(client, admin, svc):
    made = client.post(
        "/api/keys", json={"name": "bot", "scopes": ["read:memory"]}, headers=admin
    ).json
    assert made["scopes"] == ["read:memory"]
    assert svc.keys.authenticate(made["key"]).scopes == ("read:memory",)
    changed = client.patch(
        f"/api/keys/{made['id']}",
        json={"scopes": ["write:memory", "read:memory", "write:memory"]},
        headers=admin,
    )
    assert changed.status_code == 200
    assert changed.json["scopes"] == ["read:memory", "write:memory"], "canonical, once each"
    none = client.patch(f"/api/keys/{made['id']}", json={"scopes": []}, headers=admin)
    assert none.json["scopes"] == []
    assert client.get("/api/keys", headers=admin).json["data"][0]["scopes"] == []


@pytest.mark.parametrize(
    "body", [{"scopes": ["admin"]}, {"scopes": "read:memory"}, {"scopes": [3]}, {}]
)
def test_bad_scopes_are_a_422_naming_scopes_and_change_nothing(client, admin, svc, api_key, body):
    response = client.patch(f"/api/keys/{api_key['id']}", json=body, headers=admin)
    assert response.status_code == 422
    assert response.json["error"]["details"][0]["field"].startswith("scopes")
    assert svc.keys.get(api_key["id"]).scopes == ("read:memory", "write:memory")
    made = client.post("/api/keys", json={"name": "x", **body}, headers=admin)
    assert made.status_code == (201 if body == {} else 422)


def test_scopes_of_a_revoked_or_unknown_key_are_a_404(client, admin, svc, api_key):
    svc.keys.revoke(api_key["id"])
    for key_id in (api_key["id"], "no-such-key"):
        response = client.patch(f"/api/keys/{key_id}", json={"scopes": []}, headers=admin)
        assert response.status_code == 404
