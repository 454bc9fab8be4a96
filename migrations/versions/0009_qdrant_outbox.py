"""The Qdrant outbox: which memories Qdrant has yet to take or drop."""

from omniroute.core.db.migrate import run_sql_step

revision, down_revision = "0009", "0008"


def upgrade() -> None:
    run_sql_step(revision)
