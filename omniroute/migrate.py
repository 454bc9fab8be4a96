"""Numbered SQL migrations, each applied together with its record in one transaction."""

from __future__ import annotations

import logging
import re
from dataclasses import dataclass
from pathlib import Path

import pysqlite3.dbapi2 as sqlite3
from sqlalchemy import Connection

from .clock import now_iso
from .db import Database

log = logging.getLogger(__name__)

MIGRATIONS_DIR = Path(__file__).resolve().parent.parent / "migrations"
_FILE_NAME = re.compile(r"^(\d{4})_([a-z0-9_]+)\.sql$")


@dataclass(frozen=True)
class Migration:
    version: int
    name: str
    path: Path

    def statements(self) -> list[str]:
        return split_statements(self.path.read_text(encoding="utf-8"))


class MigrationError(RuntimeError):
    pass


def discover(directory: Path = MIGRATIONS_DIR) -> list[Migration]:
    """Return the migrations in `directory`, ordered, refusing duplicates and gaps."""
    migrations = []
    for path in sorted(directory.glob("*.sql")):
        match = _FILE_NAME.match(path.name)
        if not match:
            raise MigrationError(f"{path.name}: migration files are named NNNN_snake_name.sql")
        migrations.append(Migration(int(match[1]), match[2], path))
    versions = [m.version for m in migrations]
    if versions != list(range(1, len(versions) + 1)):
        raise MigrationError(f"migration numbers must run 1, 2, 3... without gaps: {versions}")
    return migrations


def split_statements(script: str) -> list[str]:
    """Split a SQL script into statements; trigger bodies with inner `;` stay whole."""
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


def _ensure_record_table(connection: Connection) -> None:
    connection.exec_driver_sql(
        "CREATE TABLE IF NOT EXISTS schema_migrations ("
        " version INTEGER PRIMARY KEY, name TEXT NOT NULL, applied_at TEXT NOT NULL)"
    )


def applied_versions(connection: Connection) -> set[int]:
    exists = connection.exec_driver_sql(
        "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'schema_migrations'"
    ).first()
    if not exists:
        return set()
    return {row[0] for row in connection.exec_driver_sql("SELECT version FROM schema_migrations")}


def upgrade(database: Database, directory: Path = MIGRATIONS_DIR) -> list[Migration]:
    """Apply every pending migration in order; return the ones applied by this call.

    Each runs in its own IMMEDIATE transaction that re-checks whether another process
    applied it meanwhile, so web, worker and release processes may start together.
    """
    applied = []
    for migration in discover(directory):
        with database.write() as connection:
            _ensure_record_table(connection)
            if migration.version in applied_versions(connection):
                continue
            for statement in migration.statements():
                connection.exec_driver_sql(statement)
            connection.exec_driver_sql(
                "INSERT INTO schema_migrations (version, name, applied_at) VALUES (?, ?, ?)",
                (migration.version, migration.name, now_iso()),
            )
        log.info("applied migration %04d_%s", migration.version, migration.name)
        applied.append(migration)
    return applied
