"""The log of vector writes that large keys' RAM matrices catch up from (SQLite)."""

from omniroute.core.db.migrate import run_sql_step

revision, down_revision = "0015", "0014"


def upgrade() -> None:
    run_sql_step(revision)
