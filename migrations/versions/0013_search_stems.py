"""The Snowball stems of each memory (search_stems), filled for every row already there."""

from alembic import op
from sqlalchemy import text

from omniroute.core.db.migrate import run_sql_step
from omniroute.memory.model import load_metadata
from omniroute.memory.search.stemming import search_stems

revision, down_revision = "0013", "0012"
BATCH = 1000


def upgrade() -> None:
    run_sql_step(revision)
    connection = op.get_bind()
    after = -1
    while True:
        rows = connection.execute(
            text(
                "SELECT seq, content, key, metadata FROM memories WHERE seq > :after"
                " ORDER BY seq LIMIT :batch"
            ),
            {"after": after, "batch": BATCH},
        ).all()
        if not rows:
            break
        connection.execute(
            text("UPDATE memories SET search_stems = :stems WHERE seq = :seq"),
            [
                {"seq": seq, "stems": search_stems(content, key, load_metadata(metadata))}
                for seq, content, key, metadata in rows
            ],
        )
        after = rows[-1][0]
