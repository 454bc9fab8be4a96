import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from sqlalchemy import inspect, text

from omniroute.core.db import Database, migrate
from omniroute.core.db.tables import SEARCH_COLUMNS, metadata
from omniroute.factory import create_app
from omniroute.memory.search.fts import keyword_search
from omniroute.memory.store import MemoryStore
from tests.helpers import environment

pytestmark = pytest.mark.both_stores
ROOT = Path(__file__).resolve().parent.parent


def schema_of(database: Database) -> dict:
    """Each table's columns and indexes, as the database describes them."""
    inspector = inspect(database.engine)
    return {
        name: (
            [column["name"] for column in inspector.get_columns(name)],
            sorted(index["name"] for index in inspector.get_indexes(name)),
        )
        for name in sorted(inspector.get_table_names())
    }


def revision_of(database: Database) -> str | None:
    with database.read() as conn:
        return migrate.current_revision(conn)


@pytest.fixture
def fresh(tmp_path, database_url, store_kind, pg_database_if_any):
    """An empty database: a new SQLite file, or a PostgreSQL database with nothing in it."""
    if store_kind == "sqlite":
        database = Database(f"sqlite:///{tmp_path / 'fresh.db'}")
    else:
        database = Database(pg_database_if_any.url)
    yield database
    database.dispose()


@pytest.fixture
def pg_database_if_any(store_kind, request):
    """For PostgreSQL, a database of its own on the pgvector server (migrations start empty)."""
    if store_kind == "sqlite":
        yield None
        return
    from tests.stores import TestDatabase

    database = TestDatabase(request.getfixturevalue("pgvector_server"))
    yield database
    database.drop()


def copy_migrations(tmp_path, count: int):
    """The first `count` revisions, with env.py and their SQL steps, in a folder of their own."""
    folder = tmp_path / "migrations"
    (folder / "versions").mkdir(parents=True, exist_ok=True)
    shutil.copy(migrate.MIGRATIONS_DIR / "env.py", folder / "env.py")
    for script in migrate.revisions()[:count]:
        name = migrate.step_name(script)
        shutil.copy(script.path, folder / "versions" / f"{name}.py")
        for dialect in ("sqlite", "postgresql"):
            (folder / dialect).mkdir(exist_ok=True)
            step = migrate.MIGRATIONS_DIR / dialect / f"{name}.sql"
            if step.is_file():  # a revision in Python alone has none
                shutil.copy(step, folder / dialect)
    return folder


def test_the_revisions_form_one_chain_each_with_a_step_for_both_dialects():
    scripts = migrate.revisions()
    assert [s.revision for s in scripts] == [f"{n:04d}" for n in range(1, len(scripts) + 1)]
    assert [s.down_revision for s in scripts] == [None] + [s.revision for s in scripts[:-1]]
    assert migrate.script_directory().get_heads() == [scripts[-1].revision]
    for script in scripts:
        if "run_sql_step" not in Path(script.path).read_text(encoding="utf-8"):
            continue  # a revision in Python alone (0021 rebuilds a vec0 table)
        for dialect in ("sqlite", "postgresql"):
            step = migrate.MIGRATIONS_DIR / dialect / f"{migrate.step_name(script)}.sql"
            assert step.is_file(), f"{script.revision} has no {dialect} step"


def test_migrating_twice_changes_nothing(fresh):
    first = migrate.upgrade(fresh)
    schema, revision = schema_of(fresh), revision_of(fresh)
    assert first == [migrate.step_name(s) for s in migrate.revisions()]
    assert revision == migrate.revisions()[-1].revision
    assert migrate.upgrade(fresh) == []
    assert schema_of(fresh) == schema
    assert revision_of(fresh) == revision


def test_migrating_a_database_that_holds_data_keeps_the_data(fresh, tmp_path):
    migrate.upgrade(fresh, copy_migrations(tmp_path, 1))
    with fresh.write() as conn:
        conn.exec_driver_sql(
            "INSERT INTO memories (id, api_key_id, type, key, content, created_at, updated_at)"
            " VALUES ('m1', 'k1', 'factual', 'pref:tea', 'Likes green tea',"
            " '2026-01-01T00:00:00.000Z', '2026-01-01T00:00:00.000Z')"
        )
    applied = migrate.upgrade(fresh)
    assert applied == [migrate.step_name(s) for s in migrate.revisions()[1:]]
    store = MemoryStore(fresh)
    assert store.get("m1").content == "Likes green tea"
    with fresh.read() as conn:
        hits = keyword_search(conn, owners=("k1",), query="tea", now_iso=store.now())
    assert [memory.id for memory, _ in hits] == ["m1"]


def test_rows_written_before_stemming_are_found_by_their_stems(fresh, tmp_path):
    migrate.upgrade(fresh, copy_migrations(tmp_path, 12))
    rows = [("m0", "k0", "Prefers modern editors", "{}"),
            ("m1", "k1", "Mag Katzen", '{"language": "de"}')]  # fmt: skip
    with fresh.write() as conn:
        conn.execute(
            text(
                "INSERT INTO memories (id, api_key_id, type, key, content, metadata, created_at,"
                " updated_at) VALUES (:id, 'k1', 'factual', :key, :content, :metadata,"
                " '2026-01-01T00:00:00.000Z', '2026-01-01T00:00:00.000Z')"
            ),
            [dict(zip(("id", "key", "content", "metadata"), row, strict=True)) for row in rows],
        )
    assert migrate.upgrade(fresh)[:2] == ["0013_search_stems", "0014_stemmed_index"]
    store = MemoryStore(fresh)
    with fresh.read() as conn:
        for query, expected in (("editor", "m0"), ("katze", "m1")):
            hits = keyword_search(conn, owners=("k1",), query=query, now_iso=store.now())
            assert [memory.id for memory, _ in hits] == [expected], query
    store.create(api_key_id="k1", key="k0", content="Prefers old editors")  # the triggers
    with fresh.read() as conn:
        hits = keyword_search(conn, owners=("k1",), query="old", now_iso=store.now())
    assert [memory.id for memory, _ in hits] == ["m0"]


def test_a_failing_migration_leaves_neither_changes_nor_a_record(fresh, tmp_path):
    folder = copy_migrations(tmp_path, 1)
    (folder / "versions" / "0002_broken.py").write_text(
        (migrate.MIGRATIONS_DIR / "versions" / "0002_memory_history.py")
        .read_text()
        .replace('"""The audit', '"""Broken: the audit')
    )
    for dialect in ("sqlite", "postgresql"):
        (folder / dialect / "0002_broken.sql").write_text(
            "CREATE TABLE half_done (a INTEGER);\nINSERT INTO no_such_table VALUES (1);\n"
        )
    with pytest.raises(Exception, match="no_such_table"):
        migrate.upgrade(fresh, folder)
    assert revision_of(fresh) is None, "not even 0001: the upgrade is one transaction"
    assert "half_done" not in schema_of(fresh)
    assert migrate.upgrade(fresh, copy_migrations(tmp_path / "good", 2)) == [
        "0001_memories",
        "0002_memory_history",
    ]


def test_a_database_migrated_before_alembic_is_adopted_where_it_stood(tmp_path):
    """The numbered files of before, with their schema_migrations rows: nothing reapplied."""
    old = Database(f"sqlite:///{tmp_path / 'old.db'}")
    names = [migrate.step_name(s) for s in migrate.revisions()]
    with old.write() as conn:
        conn.exec_driver_sql(
            "CREATE TABLE schema_migrations (version INTEGER PRIMARY KEY, name TEXT NOT NULL,"
            " applied_at TEXT NOT NULL)"
        )
        for number, name in enumerate(names[:5], start=1):
            sql = (migrate.MIGRATIONS_DIR / "sqlite" / f"{name}.sql").read_text()
            for statement in migrate.split_statements(sql):
                conn.exec_driver_sql(statement)
            conn.exec_driver_sql(
                "INSERT INTO schema_migrations VALUES (?, ?, 'then')", (number, name[5:])
            )
    assert migrate.upgrade(old) == names[5:]
    new = Database(f"sqlite:///{tmp_path / 'new.db'}")
    migrate.upgrade(new)
    assert schema_of(old) == schema_of(new)
    assert "schema_migrations" not in schema_of(old)
    old.dispose()
    new.dispose()


def test_statements_are_split_without_breaking_trigger_bodies():
    statements = migrate.split_statements(
        "-- a comment; with a semicolon\n"
        "CREATE TABLE t (a TEXT);\n"
        "CREATE TRIGGER tr AFTER INSERT ON t BEGIN\n"
        "  INSERT INTO t VALUES ('x;y');\n"
        "  DELETE FROM t WHERE a = 'z';\n"
        "END;\n"
    )
    assert len(statements) == 2
    assert statements[1].startswith("CREATE TRIGGER") and statements[1].endswith("END;")


def test_table_definitions_match_the_migrated_schema(fresh):
    migrate.upgrade(fresh)
    inspector = inspect(fresh.engine)
    for table in metadata.sorted_tables:
        columns = {c["name"]: c for c in inspector.get_columns(table.name)}
        extra = SEARCH_COLUMNS[fresh.dialect] if table.name == "memories" else set()
        assert set(columns) == {c.name for c in table.columns} | extra, table.name
        for column in table.columns:
            if not column.primary_key:
                assert columns[column.name]["nullable"] == column.nullable, (
                    f"{table.name}.{column.name}"
                )


@pytest.mark.slow
def test_three_release_processes_migrating_one_postgresql_at_once_all_succeed(
    system_postgres, tmp_path
):
    """release, web and worker start together: one migrates, the others wait and find it done.

    This is the machine's PostgreSQL 15, without pgvector: the service runs, vectors off.
    """
    env = environment(DATABASE_URL=system_postgres.url, OMNIROUTE_ADMIN_TOKEN="t")
    processes = [
        subprocess.Popen(
            [sys.executable, "-m", "flask", "--app", "app", "db", "upgrade"],
            cwd=ROOT,
            env={**env, "DATA_DIR": str(tmp_path / f"release-{n}")},
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        for n in range(3)
    ]
    outputs = [process.communicate(timeout=120)[0] for process in processes]
    assert [process.returncode for process in processes] == [0, 0, 0], outputs
    head = migrate.revisions()[-1].revision
    assert all(f"is at revision {head}" in output for output in outputs), outputs
    database = Database(system_postgres.url)
    assert revision_of(database) == head
    vectors = database.check_vectors()
    assert not vectors.available
    assert vectors.error == "this PostgreSQL server has no pgvector extension"
    database.dispose()


def test_a_release_on_postgresql_without_pgvector_says_so_loudly(system_postgres, tmp_path):
    """The machine's PostgreSQL 15 has no pgvector: the release succeeds (keyword search
    serves) but ends with a warning naming why, and /readyz reports it."""
    done = subprocess.run(
        [sys.executable, "-m", "flask", "--app", "app", "db", "upgrade"],
        cwd=Path(__file__).resolve().parent.parent,
        env=environment(DATA_DIR=str(tmp_path), DATABASE_URL=system_postgres.url),
        capture_output=True,
        text=True,
        timeout=180,
    )
    assert done.returncode == 0, done.stderr
    assert "WARNING: no vector search: pgvector unavailable" in done.stderr
    assert "install pgvector" in done.stderr
    app = create_app({"DATA_DIR": str(tmp_path), "DATABASE_URL": system_postgres.url})
    try:
        ready = app.test_client().get("/readyz").json
        assert ready["checks"]["vectors"].startswith("pgvector unavailable")
    finally:
        app.extensions["omniroute"].close()


@pytest.mark.parametrize(("element", "written"), [("float", "?"), ("int8", "vec_int8(?)")])
def test_an_old_vector_table_is_rebuilt_in_small_chunks_keeping_its_vectors(
    tmp_path, element, written
):
    database = Database(f"sqlite:///{tmp_path / 'old.db'}")
    migrate.upgrade(database, copy_migrations(tmp_path, 20))
    vectors = np.eye(4, dtype=np.float32) if element == "float" else np.eye(4, dtype=np.int8)
    with database.write() as conn:  # as SqliteVecIndex made it before migration 0021
        conn.exec_driver_sql(
            "CREATE VIRTUAL TABLE vec_memories USING vec0(owner TEXT PARTITION KEY, "
            f"embedding {element}[4] distance_metric=cosine)"
        )
        conn.exec_driver_sql(
            f"INSERT INTO vec_memories (rowid, owner, embedding) VALUES (?, ?, {written})",
            [(seq, owner, vectors[seq - 1].tobytes()) for seq, owner in
             [(1, "alice"), (2, "alice"), (3, "alice\x1fana"), (4, "bob")]],
        )  # fmt: skip
    assert migrate.upgrade(database) == ["0021_vector_chunks"]
    with database.read() as conn:
        made = conn.exec_driver_sql("SELECT sql FROM sqlite_master WHERE name = 'vec_memories'")
        assert "chunk_size=16" in made.scalar_one()
        assert conn.exec_driver_sql(
            "SELECT 1 FROM sqlite_master WHERE name = 'vec_memories_chunks_owner'"
        ).first()
        nearest = conn.exec_driver_sql(
            f"SELECT rowid FROM vec_memories WHERE embedding MATCH {written} AND owner = ? "
            "AND k = 5 ORDER BY distance",
            (vectors[1].tobytes(), "alice"),
        )
        assert [row[0] for row in nearest] == [2, 1], "each vector kept, in its partition"
        owners = conn.exec_driver_sql("SELECT rowid, owner FROM vec_memories ORDER BY rowid")
        assert [tuple(row) for row in owners] == [
            (1, "alice"), (2, "alice"), (3, "alice\x1fana"), (4, "bob"),
        ]  # fmt: skip
    assert migrate.upgrade(database) == []
    database.dispose()
