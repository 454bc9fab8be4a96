"""Upstream OpenAI-compatible providers."""

from omniroute.core.db.migrate import run_sql_step

revision, down_revision = "0005", "0004"


def upgrade() -> None:
    run_sql_step(revision)
