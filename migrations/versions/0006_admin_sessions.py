"""Studio logins, revocable in every process."""

from omniroute.core.db.migrate import run_sql_step

revision, down_revision = "0006", "0005"


def upgrade() -> None:
    run_sql_step(revision)
