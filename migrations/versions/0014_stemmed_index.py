"""Keyword search on the stems: the FTS5 index and the tsvector made from search_stems."""

from omniroute.core.db.migrate import run_sql_step

revision, down_revision = "0014", "0013"


def upgrade() -> None:
    run_sql_step(revision)
