"""A log of what keyword search reads, for the RAM keyword indexes of large keys."""

from omniroute.core.db.migrate import run_sql_step

revision, down_revision = "0017", "0016"


def upgrade() -> None:
    run_sql_step(revision)
