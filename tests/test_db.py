import pytest
import sqlite_vec

from omniroute.db import BUSY_TIMEOUT_MS, Database


def pragma(database: Database, name: str):
    with database.read() as conn:
        return conn.exec_driver_sql(f"PRAGMA {name}").scalar()


def test_sqlite_vec_is_loaded_on_every_connection(database):
    assert database.vectors.available
    with database.engine.connect() as first, database.engine.connect() as second:
        for conn in (first, second):
            assert conn.exec_driver_sql("SELECT vec_version()").scalar().startswith("v")


def test_extension_loading_is_switched_off_after_sqlite_vec_loads(database):
    with database.engine.connect() as conn:
        raw = conn.connection.dbapi_connection
        with pytest.raises(Exception, match="not authorized"):
            raw.execute("SELECT load_extension('/nonexistent/extension.so')")


def test_pragmas_are_set(database):
    assert pragma(database, "journal_mode") == "wal"
    assert pragma(database, "busy_timeout") == BUSY_TIMEOUT_MS
    assert pragma(database, "foreign_keys") == 1


def test_the_service_runs_without_vectors_when_sqlite_vec_fails_to_load(tmp_path, monkeypatch):
    def broken(connection):
        raise RuntimeError("no vec for you")

    monkeypatch.setattr(sqlite_vec, "load", broken)
    database = Database(f"sqlite:///{tmp_path / 'novec.db'}")
    database.ping()
    assert not database.vectors.available
    assert "no vec for you" in database.vectors.error
    database.dispose()


def test_only_sqlite_urls_are_accepted():
    with pytest.raises(ValueError, match="unsupported DATABASE_URL"):
        Database("postgresql://localhost/omniroute")


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


def test_unicode_case_folding_is_available_in_sql(database):
    with database.read() as conn:
        assert conn.exec_driver_sql("SELECT omr_casefold('ÄPFEL Straße')").scalar() == (
            "äpfel strasse"
        )
