"""Memories, their keyword index and what keeps it current."""

from omniroute.core.db.migrate import run_sql_step

revision, down_revision = "0001", None


def upgrade() -> None:
    run_sql_step(revision)
