"""Export every memory that matches a filter; import them back with a result per item."""

import json

import pytest
from sqlalchemy.exc import OperationalError

from omniroute.memory import listing
from omniroute.memory.model import MemoryFilter
from tests.helpers import ADMIN_TOKEN, eventually

pytestmark = pytest.mark.both_stores


def exported(client, admin, query: str = "") -> dict:
    response = client.get(f"/api/memory/export{query}", headers=admin)
    assert response.status_code == 200
    assert response.mimetype == "application/json"
    assert response.headers["Content-Disposition"].startswith('attachment; filename="omniroute-')
    return json.loads(response.get_data(as_text=True))


def imported(client, admin, body: dict) -> dict:
    response = client.post("/api/memory/import", json=body, headers=admin)
    assert response.status_code == 200, response.json
    return response.json


def test_export_holds_every_match_across_batches_newest_first(
    client, admin, svc, api_key, monkeypatch
):
    monkeypatch.setattr(listing, "EXPORT_BATCH", 7)  # several batches from a small store
    for number in range(30):
        svc.memories.create(api_key_id=api_key["id"], key=f"k{number:02}", content=f"c{number}")
    data = exported(client, admin)
    keys = [memory["key"] for memory in data["memories"]]
    assert data["count"] == 30
    assert sorted(keys) == [f"k{number:02}" for number in range(30)]
    created = [memory["createdAt"] for memory in data["memories"]]
    assert created == sorted(created, reverse=True)


def test_export_applies_the_list_filters_and_leaves_out_expired_memories(
    client, admin, svc, make_key
):
    one, two = make_key("one"), make_key("two")
    svc.memories.create(api_key_id=one["id"], key="tea", content="likes green tea")
    svc.memories.create(api_key_id=one["id"], key="job", content="is a nurse", type="episodic")
    svc.memories.create(api_key_id=two["id"], key="tea", content="likes black tea")
    svc.memories.create(
        api_key_id=one["id"], key="old", content="tea", expires_at="2000-01-01T00:00:00.000Z"
    )
    assert exported(client, admin)["count"] == 3
    by_key = exported(client, admin, f"?apiKeyId={one['id']}")
    assert {m["content"] for m in by_key["memories"]} == {"likes green tea", "is a nurse"}
    assert by_key["filters"] == {"apiKeyId": one["id"]}
    assert exported(client, admin, "?q=TEA")["count"] == 2
    assert [m["key"] for m in exported(client, admin, "?type=episodic")["memories"]] == ["job"]


def test_export_refuses_a_bad_filter_naming_it(client, admin):
    response = client.get("/api/memory/export?type=nonsense", headers=admin)
    assert response.status_code == 422
    assert response.json["error"]["details"][0]["field"] == "type"


def test_an_export_imports_back_to_the_same_memories(client, admin, svc, api_key):
    svc.memories.create(
        api_key_id=api_key["id"],
        key="lang",
        content="prefers Go",
        type="semantic",
        session_id="s1",
        metadata={"source": "user_message"},
        expires_at="2999-01-01T00:00:00.000Z",
    )
    svc.memories.create(api_key_id=api_key["id"], key="name", content="is called Ana")
    before = exported(client, admin)
    for memory in before["memories"]:
        assert client.delete(f"/api/memory/{memory['id']}", headers=admin).status_code == 200

    summary = imported(client, admin, {"memories": before["memories"]})

    assert (summary["created"], summary["updated"], summary["failed"]) == (2, 0, 0)
    fields = ("apiKeyId", "key", "content", "type", "sessionId", "metadata", "expiresAt")
    after = exported(client, admin)["memories"]
    as_set = lambda memories: {tuple(json.dumps(m[f]) for f in fields) for m in memories}  # noqa: E731
    assert as_set(after) == as_set(before["memories"])


def test_import_reports_each_item_and_keeps_the_good_ones(client, admin, api_key, make_key):
    revoked = make_key("gone")
    client.delete(f"/api/keys/{revoked['id']}", headers=admin)
    good = {"apiKeyId": api_key["id"], "key": "a", "content": "first"}
    items = [
        good,
        {"apiKeyId": api_key["id"], "key": "b", "content": ""},
        "not an object",
        {"apiKeyId": revoked["id"], "key": "c", "content": "to a revoked key"},
        {"apiKeyId": api_key["id"], "key": "d", "content": "odd type", "type": "preference"},
        {**good, "content": "first, again"},
        {"apiKeyId": api_key["id"], "content": "no key"},
    ]
    summary = imported(client, admin, {"memories": items})
    results = summary["results"]
    assert [r["status"] for r in results] == [
        "created",
        "failed",
        "failed",
        "failed",
        "created",
        "updated",
        "failed",
    ]
    assert (summary["created"], summary["updated"], summary["failed"]) == (2, 1, 4)
    assert [r["index"] for r in results] == list(range(7))
    assert results[1]["errors"][0]["field"] == "content"
    assert results[2]["errors"][0]["message"] == "Each memory must be a JSON object."
    assert results[3]["errors"] == [
        {"field": "apiKeyId", "message": "No active API key has this id."}
    ]
    assert "stored as factual" in results[4]["warnings"][0]
    assert results[6]["errors"][0]["field"] == "key"
    assert results[0]["id"] == results[5]["id"]
    listed = client.get("/api/memory", headers=admin).json["data"]
    assert {(m["key"], m["content"], m["type"]) for m in listed} == {
        ("a", "first, again", "factual"),
        ("d", "odd type", "factual"),
    }


def test_import_can_put_everything_into_one_key(client, admin, make_key):
    source, target = make_key("source"), make_key("target")
    items = [
        {"apiKeyId": source["id"], "key": "x", "content": "moved"},
        {"key": "y", "content": "z"},
    ]
    summary = imported(client, admin, {"memories": items, "apiKeyId": target["id"]})
    assert summary["created"] == 2
    listed = client.get(f"/api/memory?apiKeyId={target['id']}", headers=admin).json
    assert listed["total"] == 2


@pytest.mark.parametrize(
    "body, field",
    [
        ({}, "memories"),
        ({"memories": []}, "memories"),
        ({"memories": {"key": "x"}}, "memories"),
        ({"memories": [{}] * 10_001}, "memories"),
        ({"memories": [], "apiKeyId": ""}, "apiKeyId"),
    ],
)
def test_import_refuses_a_bad_body_naming_the_field(client, admin, body, field):
    response = client.post("/api/memory/import", json=body, headers=admin)
    assert response.status_code == 422
    assert field in {detail["field"] for detail in response.json["error"]["details"]}


def test_imported_memories_get_vectors(engine_app):
    client = engine_app.test_client()
    admin = {"Authorization": f"Bearer {ADMIN_TOKEN}"}
    key = client.post("/api/keys", json={"name": "k"}, headers=admin).json
    items = [{"key": f"k{n}", "content": f"fact number {n}"} for n in range(3)]
    imported(client, admin, {"memories": items, "apiKeyId": key["id"]})
    backfill = engine_app.extensions["omniroute"].backfill
    assert eventually(lambda: backfill.pending() == 0, timeout=30)


# A trigger that refuses one content, in each dialect's words.
REFUSING_TRIGGER = {
    "sqlite": [
        "CREATE TRIGGER refuse_boom BEFORE INSERT ON memories WHEN NEW.content = 'boom'"
        " BEGIN SELECT RAISE(ABORT, 'boom is refused'); END"
    ],
    "postgresql": [
        "CREATE FUNCTION refuse_boom() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN"
        " IF NEW.content = 'boom' THEN RAISE EXCEPTION 'boom is refused'; END IF;"
        " RETURN NEW; END $$",
        "CREATE TRIGGER refuse_boom BEFORE INSERT ON memories"
        " FOR EACH ROW EXECUTE FUNCTION refuse_boom()",
    ],
}


def test_an_item_the_database_refuses_is_reported_and_the_rest_goes_in(client, admin, svc, api_key):
    # Regression: 150 good items and 1 the write refused answered 500 with 100 committed.
    with svc.db.write() as conn:
        for statement in REFUSING_TRIGGER[svc.db.dialect]:
            conn.exec_driver_sql(statement)
    items = [{"key": f"k{n}", "content": f"fact {n}"} for n in range(150)]
    items.insert(120, {"key": "bad", "content": "boom"})
    result = imported(client, admin, {"memories": items, "apiKeyId": api_key["id"]})
    assert (result["created"], result["updated"], result["failed"]) == (150, 0, 1)
    failed = result["results"][120]
    assert (failed["key"], failed["status"]) == ("bad", "failed")
    assert "boom is refused" in failed["errors"][0]["message"]
    listed = client.get(f"/api/memory?apiKeyId={api_key['id']}&limit=1", headers=admin).json
    assert listed["total"] == 150


def test_a_write_that_fails_undoes_only_its_own_item(client, admin, svc, api_key, monkeypatch):
    """The batch is written whole; when one write fails it is written again item by item."""
    create, create_many = svc.memories.create, svc.memories.create_many

    def failing(**fields):
        if fields["key"] == "boom":
            raise OperationalError("INSERT", {}, Exception("disk I/O error"))
        return create(**fields)

    def failing_many(items, connection):
        if any(item["key"] == "boom" for item in items):
            raise OperationalError("INSERT", {}, Exception("disk I/O error"))
        return create_many(items, connection)

    monkeypatch.setattr(svc.memories, "create", failing)
    monkeypatch.setattr(svc.memories, "create_many", failing_many)
    items = [{"key": key, "content": f"about {key}"} for key in ("a", "boom", "c")]
    summary = imported(client, admin, {"apiKeyId": api_key["id"], "memories": items})
    assert (summary["created"], summary["failed"]) == (2, 1)
    failed = summary["results"][1]
    assert failed["status"] == "failed" and "id" not in failed
    assert "disk I/O error" in failed["errors"][0]["message"]
    kept = {m.key for m in svc.memories.find(MemoryFilter(api_key_id=api_key["id"]))}
    assert kept == {"a", "c"}
