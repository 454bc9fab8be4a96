"""Erasing a key (`DELETE /api/keys/{id}?erase=true`): nothing of it is left in any table, in
the vector indexes or in Qdrant, and no other key loses anything."""

from __future__ import annotations

import pytest
from sqlalchemy import Text, func, or_, select, text

from omniroute.memory.fts import keyword_search
from omniroute.memory.model import MemoryFilter
from omniroute.tables import api_keys, metadata
from tests.helpers import eventually
from tests.qdrant_helpers import ADMIN, enable, memory_app, points, synced

pytestmark = pytest.mark.both_stores


@pytest.fixture
def app(tmp_path, database_url, static_path):
    app = memory_app(tmp_path, database_url, static_path, QDRANT_PATH=str(tmp_path / "q"))
    yield app
    app.extensions["omniroute"].close()


@pytest.fixture
def svc(app):
    return app.extensions["omniroute"]


def rows_naming(svc, value: str) -> dict[str, int]:
    """Rows of every table (but api_keys) with `value` in any text column, by table."""
    found = {}
    with svc.db.read() as conn:
        for table in metadata.sorted_tables:
            columns = [c for c in table.columns if isinstance(c.type, Text)]
            if table is api_keys or not columns:
                continue
            count = conn.execute(
                select(func.count())
                .select_from(table)
                .where(or_(*[c.contains(value, autoescape=True) for c in columns]))
            ).scalar_one()
            if count:
                found[table.name] = count
        vectors = "vec_memories" if svc.db.dialect == "sqlite" else "memory_vectors"
        found["vectors"] = conn.execute(
            text(f"SELECT count(*) FROM {vectors} WHERE owner = :owner"), {"owner": value}
        ).scalar_one()
    return {name: count for name, count in found.items() if count}


def test_erase_leaves_nothing_of_the_key_and_everything_of_the_others(svc, client, make_key):
    enable(client)
    alice, bob = make_key("alice")["id"], make_key("bob")["id"]
    for owner in (alice, bob):
        for key, content in {"pet:dog": "My golden retriever Max", "job": "I am a nurse"}.items():
            client.post(
                "/api/memory",
                json={"apiKeyId": owner, "key": key, "content": content},
                headers=ADMIN,
            )
    (first, _) = svc.memories.find(MemoryFilter(api_key_id=alice))
    client.put(f"/api/memory/{first.id}", json={"content": "I am a surgeon"}, headers=ADMIN)
    svc.outbox.put(alice, "", [("I prefer tea", "user")])
    assert eventually(lambda: svc.backfill.pending() == 0, timeout=30)
    synced(svc)
    assert len(points(svc, alice)) == 2 and rows_naming(svc, alice)["vectors"] == 2

    response = client.delete(f"/api/keys/{alice}?erase=true", headers=ADMIN)
    assert response.status_code == 200, response.json
    assert response.json["erased"] == {
        "memories": 2,
        "vectors": 2,
        "history": 5,  # two creates, an update, two deletes
        "extractionOutbox": 1,
        "qdrantPoints": 2,
    }
    synced(svc)
    assert rows_naming(svc, alice) == {}
    assert points(svc, alice) == set()
    with svc.db.read() as conn:
        assert (
            keyword_search(conn, api_key_id=alice, query="nurse", now_iso=svc.memories.now()) == []
        )
    assert len(svc.memories.find(MemoryFilter(api_key_id=bob))) == 2
    assert len(points(svc, bob)) == 2
    assert svc.keys.get(alice) is None  # revoked: it cannot write again
    assert client.delete(f"/api/keys/{alice}?erase=true", headers=ADMIN).json["erased"] == {
        "memories": 0,
        "vectors": 0,
        "history": 0,
        "extractionOutbox": 0,
        "qdrantPoints": 0,
    }


@pytest.mark.parametrize("value", ["yes", "1", "TRUE", ""])
def test_erase_takes_true_or_false_only(client, make_key, value):
    key = make_key()["id"]
    response = client.delete(f"/api/keys/{key}?erase={value}", headers=ADMIN)
    assert response.status_code == 422
    assert response.json["error"]["details"][0]["field"] == "erase"


def test_erasing_an_unknown_key_is_404(client):
    assert client.delete("/api/keys/nobody?erase=true", headers=ADMIN).status_code == 404
