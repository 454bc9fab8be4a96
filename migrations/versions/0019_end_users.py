"""End users inside a key: memories of one user, and the search partition (key, user)."""

from omniroute.core.db.migrate import run_sql_step

revision, down_revision = "0019", "0018"


def upgrade() -> None:
    run_sql_step(revision)
