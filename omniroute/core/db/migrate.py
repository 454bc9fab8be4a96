"""Migrations for both dialects from one Alembic history, safe to run twice at once.

`migrations/versions/` holds the revisions, one chain. Each revision runs its dialect's own
SQL step: `migrations/sqlite/NNNN_name.sql` (FTS5 and its triggers) or
`migrations/postgresql/NNNN_name.sql` (tsvector, GIN, pgvector), creating the same tables.
The whole upgrade runs in one transaction that first takes a lock: on PostgreSQL an advisory
lock, on SQLite the write lock (BEGIN IMMEDIATE). A second process that starts at the same
moment (release, web and worker together) waits, then finds nothing left to do.
Databases migrated before Alembic (a `schema_migrations` table of numbers) are adopted: their
number becomes the revision they stand at.
"""

from __future__ import annotations

import logging
from pathlib import Path

import pysqlite3.dbapi2 as sqlite3
from alembic import command, context, op
from alembic.config import Config
from alembic.runtime.migration import MigrationContext
from alembic.script import Script, ScriptDirectory
from sqlalchemy import Connection, inspect, text

from omniroute.core.db import Database

log = logging.getLogger(__name__)

MIGRATIONS_DIR = Path(__file__).resolve().parents[3] / "migrations"
# How long a process waits for another's migration before it gives up.
MIGRATION_WAIT_SECONDS = 120.0
# pg_advisory_xact_lock's key: any fixed number that no other lock of this database uses.
ADVISORY_LOCK_KEY = 4_170_322_701
LEGACY_RECORDS = "schema_migrations"


class MigrationError(RuntimeError):
    pass


def script_directory(directory: Path = MIGRATIONS_DIR) -> ScriptDirectory:
    return ScriptDirectory.from_config(_config(directory))


def _config(directory: Path) -> Config:
    config = Config()
    config.set_main_option("script_location", str(directory))
    return config


def revisions(directory: Path = MIGRATIONS_DIR) -> list[Script]:
    """The revisions, oldest first."""
    return list(reversed(list(script_directory(directory).walk_revisions())))


def step_name(script: Script) -> str:
    """The revision's name as its SQL files carry it: "0001_memories"."""
    return Path(script.path).stem


def current_revision(connection: Connection) -> str | None:
    return MigrationContext.configure(connection).get_current_revision()


def upgrade(database: Database, directory: Path = MIGRATIONS_DIR) -> list[str]:
    """Apply every pending revision; return the names of those this call applied."""
    config = _config(directory)
    scripts = ScriptDirectory.from_config(config)
    with database.write(wait_seconds=MIGRATION_WAIT_SECONDS) as connection:
        if database.dialect == "postgresql":
            connection.execute(text(f"SET LOCAL lock_timeout = '{MIGRATION_WAIT_SECONDS:g}s'"))
            lock = text("SELECT pg_advisory_xact_lock(:key)")
            connection.execute(lock, {"key": ADVISORY_LOCK_KEY})
        _adopt_numbered_records(connection, scripts)
        before = current_revision(connection)
        config.attributes["connection"] = connection
        command.upgrade(config, "head")
        after = current_revision(connection)
        applied = [step_name(script) for script in scripts.iterate_revisions(after, before)][::-1]
    for name in applied:
        log.info("applied migration %s", name)
    database.check_vectors()  # a migration may have created pgvector
    return applied


def _adopt_numbered_records(connection: Connection, scripts: ScriptDirectory) -> None:
    """Stamp a database migrated by numbered files before Alembic at the revision it reached."""
    tables = inspect(connection)
    if not tables.has_table(LEGACY_RECORDS) or tables.has_table("alembic_version"):
        return
    version = connection.execute(text(f"SELECT max(version) FROM {LEGACY_RECORDS}")).scalar()
    if version:
        MigrationContext.configure(connection).stamp(scripts, f"{version:04d}")
        log.info("adopted a database at migration %04d into Alembic's history", version)
    connection.execute(text(f"DROP TABLE {LEGACY_RECORDS}"))


def run_sql_step(revision: str) -> None:
    """Run a revision's SQL step for the dialect at hand (called by the revision scripts)."""
    connection = op.get_bind()
    folder = Path(context.config.get_main_option("script_location")) / connection.dialect.name
    found = sorted(folder.glob(f"{revision}_*.sql"))
    if len(found) != 1:
        raise MigrationError(f"revision {revision} needs one SQL step in {folder}, found {found}")
    script = found[0].read_text(encoding="utf-8")
    if connection.dialect.name == "sqlite":
        for statement in split_statements(script):
            connection.exec_driver_sql(statement)
    else:  # psycopg runs a whole script, dollar-quoted bodies included, in one call; with
        # no parameters at all, so a `%` in it is only a character
        cursor = connection.connection.cursor()
        try:
            cursor.execute(script)
        finally:
            cursor.close()


def split_statements(script: str) -> list[str]:
    """Split a SQLite script into statements; trigger bodies with inner `;` stay whole."""
    statements, buffer = [], ""
    for piece in script.split(";"):
        buffer += piece + ";"
        if sqlite3.complete_statement(buffer):
            statement = _strip_comments(buffer).strip()
            if statement.rstrip(";").strip():
                statements.append(statement)
            buffer = ""
    if _strip_comments(buffer).strip(" \n\t;"):
        raise MigrationError(f"incomplete SQL statement at the end: {buffer.strip()[:80]!r}")
    return statements


def _strip_comments(sql: str) -> str:
    return "\n".join(line for line in sql.splitlines() if not line.lstrip().startswith("--"))
