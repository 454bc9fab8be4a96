import sys

import pytest
import sqlite_vec
from sqlalchemy.exc import OperationalError

from omniroute.core.db import Database, is_busy
from omniroute.core.db.sqlite_engine import BUSY_TIMEOUT_MS

pytestmark = pytest.mark.both_stores


def pragma(database: Database, name: str):
    with database.read() as conn:
        return conn.exec_driver_sql(f"PRAGMA {name}").scalar()


@pytest.mark.sqlite_only
def test_sqlite_vec_is_loaded_on_every_connection(database):
    assert database.vectors.available
    with database.engine.connect() as first, database.engine.connect() as second:
        for conn in (first, second):
            assert conn.exec_driver_sql("SELECT vec_version()").scalar().startswith("v")


@pytest.mark.sqlite_only
def test_extension_loading_is_switched_off_after_sqlite_vec_loads(database):
    with database.engine.connect() as conn:
        raw = conn.connection.dbapi_connection
        with pytest.raises(Exception, match="not authorized"):
            raw.execute("SELECT load_extension('/nonexistent/extension.so')")


@pytest.mark.sqlite_only
def test_pragmas_are_set(database):
    assert pragma(database, "journal_mode") == "wal"
    assert pragma(database, "busy_timeout") == BUSY_TIMEOUT_MS
    assert pragma(database, "foreign_keys") == 1


def test_the_service_runs_without_vectors_when_sqlite_vec_fails_to_load(tmp_path, monkeypatch):
    def broken(connection):
        raise RuntimeError("no vec for you")

    monkeypatch.setattr(sqlite_vec, "load", broken)
    database = Database(f"sqlite:///{tmp_path / 'novec.db'}")
    with database.read() as connection:  # the first connection tries to load it
        assert connection.exec_driver_sql("SELECT 1").scalar_one() == 1
    assert not database.vectors.available
    assert "no vec for you" in database.vectors.error
    database.dispose()


@pytest.mark.parametrize(
    "url", ["mysql://localhost/omniroute", "sqlite://", "redis://127.0.0.1:6379/0"]
)
def test_only_sqlite_and_postgresql_urls_are_accepted(url):
    with pytest.raises(ValueError, match="unsupported DATABASE_URL"):
        Database(url)


def test_a_password_in_the_url_never_shows(tmp_path):
    database = Database("postgresql://omr:s3cret-pw@127.0.0.1:1/omniroute")
    assert "s3cret-pw" not in database.url
    with pytest.raises(ValueError) as refused:
        Database("mysql://omr:s3cret-pw@127.0.0.1/omniroute")
    assert "s3cret-pw" not in str(refused.value)
    database.dispose()


@pytest.mark.parametrize("scheme", ["postgres", "postgresql", "postgresql+psycopg"])
def test_the_schemes_platforms_set_select_postgresql_with_psycopg(scheme):
    database = Database(f"{scheme}://omr@127.0.0.1:1/omniroute", pool_size=3)
    assert database.dialect == "postgresql"
    assert database.engine.url.drivername == "postgresql+psycopg"
    assert database.engine.pool.size() == 3
    database.dispose()


def test_the_dialect_is_the_databases(database, store_kind):
    assert database.dialect == store_kind
    assert database.vectors.available, database.vectors.error
    assert (
        database.vectors.backend == {"sqlite": "sqlite-vec", "postgresql": "pgvector"}[store_kind]
    )


def test_a_write_is_rolled_back_when_its_block_raises(database):
    with pytest.raises(RuntimeError), database.write() as conn:
        conn.exec_driver_sql("INSERT INTO settings VALUES ('a', '1', 'now')")
        raise RuntimeError("boom")
    with database.read() as conn:
        assert conn.exec_driver_sql("SELECT count(*) FROM settings").scalar() == 0


def test_a_scratch_transaction_never_leaves_a_trace(database):
    with database.scratch() as conn:
        conn.exec_driver_sql("INSERT INTO settings VALUES ('a', '1', 'now')")
        assert conn.exec_driver_sql("SELECT count(*) FROM settings").scalar() == 1
    with database.read() as conn:
        assert conn.exec_driver_sql("SELECT count(*) FROM settings").scalar() == 0


def test_an_upsert_replaces_the_row_in_either_dialect(database):
    from omniroute.core.db.tables import settings

    for value in ("1", "2"):
        statement = database.insert(settings).values(key="a", value=value, updated_at="now")
        with database.write() as conn:
            conn.execute(
                statement.on_conflict_do_update(
                    index_elements=[settings.c.key], set_={"value": statement.excluded.value}
                )
            )
    with database.read() as conn:
        assert conn.exec_driver_sql("SELECT value FROM settings").all() == [("2",)]


@pytest.mark.sqlite_only
def test_unicode_case_folding_is_available_in_sql(database):
    with database.read() as conn:
        assert conn.exec_driver_sql("SELECT omr_casefold('ÄPFEL Straße')").scalar() == (
            "äpfel strasse"
        )


def test_a_postgresql_row_lock_held_too_long_reads_as_busy(pg_database):
    """Another transaction holds the row: the write waits DB_WRITE_WAIT_SECONDS, then busy."""
    pg_database.empty()
    database, impatient = Database(pg_database.url), Database(pg_database.url, 0.2)
    with database.write() as conn:
        conn.exec_driver_sql("INSERT INTO settings VALUES ('a', '1', 'now')")
    with database.write() as holder:
        holder.exec_driver_sql("UPDATE settings SET value = '2' WHERE key = 'a'")
        with pytest.raises(Exception) as waited, impatient.write() as conn:
            conn.exec_driver_sql("UPDATE settings SET value = '3' WHERE key = 'a'")
    assert is_busy(waited.value)
    database.dispose()
    impatient.dispose()


@pytest.mark.parametrize("idle", [True, False], ids=["idle", "busy"])
def test_a_pooled_postgresql_connection_the_server_closed_is_replaced(pg_database, monkeypatch,
                                                                      idle):  # fmt: skip
    """A connection idle PING_IDLE_SECONDS is pinged before use and replaced if dead; one in
    steady use is not pinged, so a server that dropped it fails one transaction at most."""
    engines = sys.modules["omniroute.core.db.postgres_engine"]  # the package shadows its name
    monkeypatch.setattr(engines, "PING_IDLE_SECONDS", 0 if idle else 3600)
    database = Database(pg_database.url, pool_size=1)
    try:
        with database.read() as conn:
            backend = conn.exec_driver_sql("SELECT pg_backend_pid()").scalar_one()
        killer = Database(pg_database.url)
        with killer.read() as conn:
            conn.exec_driver_sql("SELECT pg_terminate_backend(%(pid)s)", {"pid": backend})
        killer.dispose()
        if not idle:
            with pytest.raises(OperationalError), database.read() as conn:
                conn.exec_driver_sql("SELECT 1")
        with database.read() as conn:
            assert conn.exec_driver_sql("SELECT pg_backend_pid()").scalar_one() != backend
    finally:
        database.dispose()


def test_a_write_clears_the_stores_cache_again_after_its_commit(store):
    """Database.after_commit: what a write's readers may see only once it commits."""
    memory, _ = store.create(api_key_id="k", key="fact:city", content="Lives in Porto")
    seen = []
    with store.db.write() as conn:
        store.db.after_commit(conn, lambda: seen.append("committed"))
        store.update(memory.id, content="Lives in Lisbon", connection=conn)
        assert seen == []
        store._cache.get(memory.id, lambda: memory)  # a reader's copy of the row as it was
    assert seen == ["committed"]
    misses = store.cache_misses
    assert store.get(memory.id).content == "Lives in Lisbon"
    assert store.cache_misses == misses + 1, "read again, not served from the cache"
