"""The studio's Activity view: per-minute totals of what the gateway did, from every process."""

from omniroute.core.db.migrate import run_sql_step

revision, down_revision = "0012", "0011"


def upgrade() -> None:
    run_sql_step(revision)
