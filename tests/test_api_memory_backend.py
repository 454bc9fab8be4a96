"""/api/memory with a remote primary: the list, add, get, change and delete of the REST API
(and so of the studio, which sends its edits there) act on the backend that serves; its
failures are 502s naming it, never 500s, and nothing is written locally instead."""

from __future__ import annotations

import pytest

from omniroute.api.memories import SIBLING_ROUTES
from omniroute.memory.model import MemoryFilter
from tests.obsidian_vault import API_KEY as VAULT_KEY
from tests.obsidian_vault import ObsidianVault

pytestmark = pytest.mark.both_stores


@pytest.fixture
def alice(svc, memory_service):
    """The service as primary, the local store as fallback, and alice's key id."""
    svc.memory_settings.update(
        {
            "backendConfigs": {"brain": {"baseUrl": memory_service.url}},
            "primaryBackend": "brain",
            "fallbackBackends": ["sqlite"],
        }
    )
    key, _ = svc.keys.create("alice")
    return key.id


def local(svc, key_id):
    return svc.memories.find(MemoryFilter(api_key_id=key_id))


def test_the_list_is_the_primarys_and_says_who_served_it(client, admin, alice, memory_service):
    memory_service.add(apiKeyId=alice, key="preference:editor", content="I prefer Vim")
    memory_service.add(apiKeyId=alice, key="fact:city", content="Lives in Porto", type="episodic")
    memory_service.add(apiKeyId="bob", key="preference:editor", content="Bob likes Emacs")
    listed = client.get(f"/api/memory?apiKeyId={alice}&limit=10", headers=admin).json
    assert listed["backend"] == "brain"
    assert sorted(m["key"] for m in listed["data"]) == ["fact:city", "preference:editor"]
    assert listed["total"] == 2 and listed["totalPages"] == 1
    assert listed["stats"]["tokensUsed"] == (12 + 3) // 4 + (14 + 3) // 4
    asked = memory_service.last["query"]
    assert (asked["apiKeyId"], asked["limit"], asked["offset"]) == (alice, "10", "0")
    filtered = client.get(f"/api/memory?apiKeyId={alice}&q=porto&type=episodic", headers=admin)
    assert [m["key"] for m in filtered.json["data"]] == ["fact:city"]
    assert memory_service.last["query"]["query"] == "porto"


def test_the_default_list_is_the_local_stores(client, admin, svc, memory_service):
    key, _ = svc.keys.create("carol")
    svc.memories.create(api_key_id=key.id, key="k", content="kept here")
    listed = client.get("/api/memory", headers=admin).json
    assert listed["backend"] == "local" and [m["key"] for m in listed["data"]] == ["k"]
    assert memory_service.requests == []


def test_add_is_an_upsert_on_the_primary_and_nothing_goes_local(
    client, admin, svc, alice, memory_service
):
    body = {"apiKeyId": alice, "key": "preference:editor", "content": "I prefer Vim"}
    first = client.post("/api/memory", json=body, headers=admin)
    assert first.status_code == 201 and first.json["created"] is True
    again = client.post("/api/memory", json={**body, "content": "Helix now"}, headers=admin)
    assert again.json["created"] is False
    assert again.json["memory"]["id"] == first.json["memory"]["id"]
    assert [m["content"] for m in memory_service.memories.values()] == ["Helix now"]
    assert local(svc, alice) == []
    refused = client.post("/api/memory", json={**body, "apiKeyId": "nobody"}, headers=admin)
    assert refused.status_code == 404 and refused.json["error"]["details"][0]["field"] == "apiKeyId"


def test_get_change_and_delete_act_on_the_primary(client, admin, alice, memory_service):
    memory = memory_service.add(apiKeyId=alice, key="preference:editor", content="I prefer Vim")
    path = f"/api/memory/{memory['id']}"
    assert client.get(path, headers=admin).json["memory"]["content"] == "I prefer Vim"
    changed = client.put(path, json={"content": "Helix", "type": "procedural"}, headers=admin)
    assert changed.status_code == 200, changed.json
    assert changed.json["memory"]["content"] == "Helix"
    assert memory_service.memories[memory["id"]]["type"] == "procedural"
    assert client.delete(path, headers=admin).json == {"success": True}
    assert memory_service.memories == {}
    for method in ("get", "put", "delete"):
        gone = getattr(client, method)(path, json={"content": "x"}, headers=admin)
        assert gone.status_code == 404, method


def test_get_falls_back_to_the_local_store(client, admin, svc, alice, memory_service):
    kept, _ = svc.memories.create(api_key_id=alice, key="old", content="from before the switch")
    answer = client.get(f"/api/memory/{kept.id}", headers=admin)
    assert answer.status_code == 200
    assert answer.json["memory"]["content"] == "from before the switch"


def test_delete_many_clears_the_keys_memories_on_the_primary(client, admin, alice, memory_service):
    for n in range(3):
        memory_service.add(apiKeyId=alice, key=f"k{n}", content=f"fact {n}")
    bobs = memory_service.add(apiKeyId="bob", key="k0", content="Bob's")
    dry = client.delete(f"/api/memory?apiKeyId={alice}&dryRun=true", headers=admin).json
    assert dry == {"matched": 3, "deletedCount": 0, "dryRun": True}
    assert len(memory_service.memories) == 4
    done = client.delete(f"/api/memory?apiKeyId={alice}", headers=admin).json
    assert done["deletedCount"] == 3
    assert list(memory_service.memories) == [bobs["id"]]


def test_delete_many_clears_the_keys_memories_on_the_fallbacks_too(
    client, admin, svc, alice, memory_service
):
    svc.memories.create(api_key_id=alice, key="old", content="from before the switch")
    bob, _ = svc.keys.create("bob")
    svc.memories.create(api_key_id=bob.id, key="old", content="Bob's")
    memory_service.add(apiKeyId=alice, key="k", content="new")
    dry = client.delete(f"/api/memory?apiKeyId={alice}&dryRun=true", headers=admin).json
    assert dry["matched"] == 1
    svc.backends.manager.wait()
    assert len(local(svc, alice)) == 1, "a dry run deletes nothing anywhere"
    assert client.delete(f"/api/memory?apiKeyId={alice}", headers=admin).json["deletedCount"] == 1
    svc.backends.manager.wait()
    assert memory_service.memories == {} and local(svc, alice) == []
    assert [m.content for m in local(svc, bob.id)] == ["Bob's"]


def test_with_the_local_store_primary_changes_reach_the_fallbacks(
    client, admin, svc, memory_service
):
    svc.memory_settings.update(
        {
            "backendConfigs": {"brain": {"baseUrl": memory_service.url}},
            "primaryBackend": "sqlite",
            "fallbackBackends": ["brain"],
        }
    )
    key, _ = svc.keys.create("carol")
    body = {"apiKeyId": key.id, "key": "preference:editor", "content": "I prefer Vim"}
    made = client.post("/api/memory", json=body, headers=admin).json["memory"]
    assert memory_service.memories == {}, "a create goes to the primary only"
    memory_service.add(id=made["id"], apiKeyId=key.id, key=made["key"], content=made["content"])
    path = f"/api/memory/{made['id']}"
    changed = client.put(path, json={"content": "I prefer Helix"}, headers=admin)
    assert changed.json["memory"]["content"] == "I prefer Helix"
    svc.backends.manager.wait()
    assert memory_service.memories[made["id"]]["content"] == "I prefer Helix"
    assert client.delete(path, headers=admin).json == {"success": True}
    svc.backends.manager.wait()
    assert memory_service.memories == {} and local(svc, key.id) == []


@pytest.mark.parametrize(
    ("method", "path", "failing", "body"),
    [
        ("get", "/api/memory", ("GET", "/memories"), None),
        ("post", "/api/memory", ("GET", "/memories"), {"key": "k", "content": "c"}),
        ("put", "/api/memory/{id}", ("PATCH", "/memories/{id}"), {"content": "c"}),
        ("delete", "/api/memory/{id}", ("DELETE", "/memories/{id}"), None),
        ("delete", "/api/memory?apiKeyId={key}", ("GET", "/memories"), None),
    ],
)
def test_a_failing_primary_is_a_502_naming_it_and_nothing_is_written_locally(
    client, admin, svc, alice, memory_service, method, path, failing, body
):
    memory = memory_service.add(apiKeyId=alice, key="k", content="c")
    memory_service.answers[(failing[0], failing[1].format(id=memory["id"]))] = (500, "disk full")
    if body is not None:
        body = {**body, "apiKeyId": alice} if method == "post" else body
    target = path.format(id=memory["id"], key=alice)
    answer = getattr(client, method)(target, json=body, headers=admin)
    assert answer.status_code == 502, answer.json
    message = answer.json["error"]["message"]
    assert message.startswith("Memory backend brain failed:") and "disk full" in message
    assert local(svc, alice) == []
    assert list(memory_service.memories) == [memory["id"]]


@pytest.fixture
def vault(svc):
    """An Obsidian vault as primary."""
    running = ObsidianVault().start()
    config = {"type": "obsidian", "baseUrl": running.url, "apiKey": VAULT_KEY}
    svc.memory_settings.update({"backendConfigs": {"vault": config}, "primaryBackend": "vault"})
    yield running
    running.stop()


def test_a_backend_that_lists_one_key_at_a_time_asks_for_it(client, admin, svc, vault):
    answer = client.get("/api/memory", headers=admin)
    assert answer.status_code == 422
    (detail,) = answer.json["error"]["details"]
    assert detail["field"] == "apiKeyId" and "one key" in detail["message"]
    key, _ = svc.keys.create("alice")
    listed = client.get(f"/api/memory?apiKeyId={key.id}", headers=admin).json
    assert (listed["backend"], listed["total"]) == ("vault", 0)


def test_a_vault_notes_id_is_one_path_segment_so_rest_reaches_it(client, admin, svc, vault):
    key, _ = svc.keys.create("alice")
    body = {"apiKeyId": key.id, "key": "preference/editor", "content": "I prefer Vim"}
    memory = client.post("/api/memory", json=body, headers=admin).json["memory"]
    path = f"/api/memory/{memory['id']}"
    assert client.get(path, headers=admin).json["memory"]["content"] == "I prefer Vim"
    changed = client.put(path, json={"content": "Helix"}, headers=admin)
    assert changed.status_code == 200 and changed.json["memory"]["content"] == "Helix"
    assert list(vault.notes) == [f"OmniRoute/{key.id}/preference_editor.md"]
    assert client.delete(path, headers=admin).status_code == 200
    assert vault.notes == {}


def test_the_spec_declares_the_backends_502(client):
    paths = client.get("/openapi.json").json["paths"]
    assert "502" in paths["/api/memory"]["get"]["responses"]
    assert "502" in paths["/api/memory/{memory_id}"]["put"]["responses"]
    assert "502" not in paths["/api/memory/{memory_id}/history"]["get"]["responses"]


def test_the_spec_keeps_sibling_routes_out_of_memory_ids(app, client):
    siblings = {
        rule.rule.removeprefix("/api/memory/")
        for rule in app.url_map.iter_rules()
        if rule.rule.startswith("/api/memory/") and "<" not in rule.rule
        and rule.rule.count("/") == 3
    }  # fmt: skip
    assert siblings == set(SIBLING_ROUTES)
    (parameter,) = client.get("/openapi.json").json["paths"]["/api/memory/{memory_id}"][
        "parameters"
    ]
    assert all(name in parameter["description"] for name in siblings)


@pytest.mark.parametrize(
    ("method", "path", "allowed"),
    [("PUT", "/api/memory/health", {"GET", "HEAD", "OPTIONS"}),
     ("DELETE", "/api/memory/export", {"GET", "HEAD", "OPTIONS"}),
     ("GET", "/api/memory/import", {"POST", "OPTIONS"}),
     ("PUT", "/api/memory/retrieve-preview", {"POST", "OPTIONS"})],
)  # fmt: skip
def test_a_sibling_route_is_never_taken_for_a_memory_id(client, admin, method, path, allowed):
    answer = client.open(path, method=method, headers=admin, json={"content": "x"})
    assert answer.status_code == 405
    assert set(answer.headers["Allow"].replace(" ", "").split(",")) == allowed
    options = client.options(path, headers=admin)
    assert set(options.headers["Allow"].replace(" ", "").split(",")) == allowed
