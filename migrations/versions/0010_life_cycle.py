"""The memory life cycle: the reason of a deletion, and the periodic jobs' record."""

from omniroute.core.db.migrate import run_sql_step

revision, down_revision = "0010", "0009"


def upgrade() -> None:
    run_sql_step(revision)
