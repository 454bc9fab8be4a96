import shutil

import pytest
from sqlalchemy import inspect

from omniroute import migrate
from omniroute.db import Database
from omniroute.memory.fts import keyword_search
from omniroute.memory.store import MemoryStore
from omniroute.tables import metadata


def schema_of(database: Database) -> list[tuple]:
    with database.read() as conn:
        return conn.exec_driver_sql(
            "SELECT type, name, sql FROM sqlite_master ORDER BY type, name"
        ).all()


def records_of(database: Database) -> list[tuple]:
    with database.read() as conn:
        return conn.exec_driver_sql("SELECT * FROM schema_migrations ORDER BY version").all()


@pytest.fixture
def fresh(tmp_path):
    database = Database(f"sqlite:///{tmp_path / 'fresh.db'}")
    yield database
    database.dispose()


def copy_migrations(tmp_path, count: int):
    folder = tmp_path / "migrations"
    folder.mkdir(exist_ok=True)
    for migration in migrate.discover()[:count]:
        shutil.copy(migration.path, folder / migration.path.name)
    return folder


def test_migration_numbers_are_unique_and_have_no_gaps():
    versions = [m.version for m in migrate.discover()]
    assert versions == list(range(1, len(versions) + 1))


@pytest.mark.parametrize(
    ("names", "problem"),
    [
        (["0001_a.sql", "0003_c.sql"], "without gaps"),
        (["0001_a.sql", "0001_b.sql"], "without gaps"),
        (["0001_a.sql", "2_b.sql"], "NNNN_snake_name"),
    ],
)
def test_a_gap_a_duplicate_or_a_bad_name_is_refused(tmp_path, names, problem):
    for name in names:
        (tmp_path / name).write_text("SELECT 1;")
    with pytest.raises(migrate.MigrationError, match=problem):
        migrate.discover(tmp_path)


def test_migrating_twice_changes_nothing(fresh):
    first = migrate.upgrade(fresh)
    schema, records = schema_of(fresh), records_of(fresh)
    assert [m.version for m in first] == [m.version for m in migrate.discover()]
    assert migrate.upgrade(fresh) == []
    assert schema_of(fresh) == schema
    assert records_of(fresh) == records


def test_migrating_a_database_that_holds_data_keeps_the_data(fresh, tmp_path):
    migrate.upgrade(fresh, copy_migrations(tmp_path, 1))
    with fresh.write() as conn:
        conn.exec_driver_sql(
            "INSERT INTO memories (id, api_key_id, type, key, content, created_at, updated_at)"
            " VALUES ('m1', 'k1', 'factual', 'pref:tea', 'Likes green tea',"
            " '2026-01-01T00:00:00.000Z', '2026-01-01T00:00:00.000Z')"
        )
    applied = migrate.upgrade(fresh)
    assert [m.version for m in applied] == [m.version for m in migrate.discover()[1:]]
    store = MemoryStore(fresh)
    assert store.get("m1").content == "Likes green tea"
    with fresh.read() as conn:
        hits = keyword_search(conn, api_key_id="k1", query="tea", now_iso=store.now())
    assert [memory.id for memory, _ in hits] == ["m1"]


def test_a_failing_migration_leaves_neither_changes_nor_a_record(fresh, tmp_path):
    folder = copy_migrations(tmp_path, 1)
    (folder / "0002_broken.sql").write_text(
        "CREATE TABLE half_done (a INTEGER);\nINSERT INTO no_such_table VALUES (1);\n"
    )
    with pytest.raises(Exception, match="no_such_table"):
        migrate.upgrade(fresh, folder)
    with fresh.read() as conn:
        assert migrate.applied_versions(conn) == {1}
    assert "half_done" not in {name for _, name, _ in schema_of(fresh)}


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
        assert set(columns) == {c.name for c in table.columns}, table.name
        for column in table.columns:
            if not column.primary_key:
                assert columns[column.name]["nullable"] == column.nullable, (
                    f"{table.name}.{column.name}"
                )
