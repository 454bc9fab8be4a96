"""Gateway API keys (hashed) and runtime settings."""

from omniroute.core.db.migrate import run_sql_step

revision, down_revision = "0003", "0002"


def upgrade() -> None:
    run_sql_step(revision)
