"""Erasing a key (`DELETE /api/keys/{id}?erase=true`): nothing of it is left in any table, in
the vector indexes or in Qdrant, and no other key loses anything."""

from __future__ import annotations

from pathlib import Path

import pytest
from sqlalchemy import Text, func, or_, select, text

from omniroute.core.db.tables import api_keys, metadata
from omniroute.memory.model import MemoryFilter
from omniroute.memory.search.fts import keyword_search
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
            keyword_search(conn, owners=(alice,), query="nurse", now_iso=svc.memories.now()) == []
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


# Words no other text holds; what is searched for is each one's tail, which the keyword
# index keeps even where it stores a term as a suffix of the one before it.
SECRETS = ("Xylophonequartz", "Quibblewhackets", "Snorkelvampire")


def database_bytes(svc) -> bytes:
    path = Path(svc.db.path)
    return b"".join(
        candidate.read_bytes()
        for candidate in (path, path.with_name(path.name + "-wal"))
        if candidate.exists()
    )


@pytest.mark.sqlite_only
def test_erase_leaves_no_byte_of_the_text_in_the_database_files(svc, client, make_key):
    alice, bob = make_key("alice")["id"], make_key("bob")["id"]
    filler = " ".join(f"word{n}" for n in range(200))  # pages shared with other rows
    for owner in (alice, bob):
        for n in range(30):
            client.post("/api/memory", headers=ADMIN, json={
                "apiKeyId": owner, "key": f"note:{n}", "content": f"{filler} {owner} {n}"
            })  # fmt: skip
    made = client.post("/api/memory", headers=ADMIN, json={
        "apiKeyId": alice, "key": "secret:one", "content": f"My code word is {SECRETS[0]}"
    }).json["memory"]  # fmt: skip
    client.put(f"/api/memory/{made['id']}", headers=ADMIN,
               json={"content": f"My code word is {SECRETS[1]} now"})  # fmt: skip
    svc.outbox.put(alice, "", [(f"Remember {SECRETS[2]} for me", "user")])
    svc.db.scrub()  # everything so far in the file itself, not only in the log
    assert all(word[-8:].lower().encode() in database_bytes(svc).lower() for word in SECRETS)

    response = client.delete(f"/api/keys/{alice}?erase=true", headers=ADMIN)
    assert response.status_code == 200, response.json
    left = database_bytes(svc).lower()
    for word in SECRETS:
        assert word[-8:].lower().encode() not in left, f"{word} is still on disk"
    assert f"{bob} 29".encode() in left, "the other key's memories are all there"
    with svc.db.read() as conn:
        assert (
            conn.exec_driver_sql("INSERT INTO memory_fts (memory_fts) VALUES ('integrity-check')")
            is not None
        )


def data_files(svc) -> list[Path]:
    """The files the database keeps its tables in: SQLite's file and log, or this
    PostgreSQL database's folder (its WAL, pg_wal, is the server's and is left out)."""
    if svc.db.dialect == "sqlite":
        path = Path(svc.db.path)
        return [p for p in (path, path.with_name(path.name + "-wal")) if p.exists()]
    with svc.db.read() as conn:
        folder = conn.exec_driver_sql("SHOW data_directory").scalar_one()
        oid = conn.exec_driver_sql(
            "SELECT oid FROM pg_database WHERE datname = current_database()"
        ).scalar_one()
    return [p for p in (Path(folder) / "base" / str(oid)).iterdir() if p.is_file()]


def data_bytes(svc) -> bytes:
    """Every byte of the data files. PostgreSQL unlinks and rewrites some files (the
    relation cache, pg_internal.init) at any moment: one gone between the listing and
    the read holds nothing any more and is passed over."""
    chunks = []
    for path in data_files(svc):
        try:
            chunks.append(path.read_bytes())
        except FileNotFoundError:
            continue
    return b"".join(chunks)


def test_a_full_scrub_after_an_erase_leaves_no_byte_in_the_data_files(app, svc, client, make_key):
    alice = make_key("alice")["id"]
    for n, word in enumerate(SECRETS):
        client.post("/api/memory", headers=ADMIN, json={
            "apiKeyId": alice, "key": f"secret:{n}", "content": f"My code word is {word}"
        })  # fmt: skip
    client.delete(f"/api/keys/{alice}?erase=true", headers=ADMIN)
    result = app.test_cli_runner().invoke(args=["memory", "scrub", "--full"])
    assert result.exit_code == 0 and "no deleted text is left" in result.output, result.output
    left = data_bytes(svc).lower()
    assert left, "the files were read"
    for word in SECRETS:
        assert word[-8:].lower().encode() not in left, f"{word} is still on disk"
