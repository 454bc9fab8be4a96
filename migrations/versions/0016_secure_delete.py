"""Deleted text leaves no trace in the keyword index (SQLite's FTS5 secure-delete)."""

from omniroute.core.db.migrate import run_sql_step

revision, down_revision = "0016", "0015"


def upgrade() -> None:
    run_sql_step(revision)
