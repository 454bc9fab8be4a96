"""PostgreSQL logs its vector writes too, for the RAM copies of large keys' vectors."""

from omniroute.core.db.migrate import run_sql_step

revision, down_revision = "0018", "0017"


def upgrade() -> None:
    run_sql_step(revision)
