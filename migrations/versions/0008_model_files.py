"""Model files every process reads (the distilled static model)."""

from omniroute.core.db.migrate import run_sql_step

revision, down_revision = "0008", "0007"


def upgrade() -> None:
    run_sql_step(revision)
