"""Gateway keys' scopes: what a key may do with its memories through MCP."""

from omniroute.core.db.migrate import run_sql_step

revision, down_revision = "0011", "0010"


def upgrade() -> None:
    run_sql_step(revision)
