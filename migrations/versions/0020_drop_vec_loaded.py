"""Drop memory_vec_meta.vec_loaded: written, never read, and not a fact one row can hold."""

from omniroute.core.db.migrate import run_sql_step

revision, down_revision = "0020", "0019"


def upgrade() -> None:
    run_sql_step(revision)
