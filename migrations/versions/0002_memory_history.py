"""The audit trail: one row for each create, update and delete of a memory."""

from omniroute.core.db.migrate import run_sql_step

revision, down_revision = "0002", "0001"


def upgrade() -> None:
    run_sql_step(revision)
