"""Texts waiting for fact extraction, so a lost job loses nothing."""

from omniroute.core.db.migrate import run_sql_step

revision, down_revision = "0007", "0006"


def upgrade() -> None:
    run_sql_step(revision)
