"""SQLite's vec0 table in chunks of 16 vectors, with its chunks' partition index.

A table made before (sqlite-vec's default chunks of 1,024 vectors, allocated whole for every
partition: 1 MB per end user) is rebuilt by copying its vectors; nothing is embedded again.
Where sqlite-vec did not load, the index's next `prepare` does it. PostgreSQL: nothing.
"""

import logging

from alembic import op

from omniroute.memory.search.vectors import rechunk

revision, down_revision = "0021", "0020"
log = logging.getLogger(__name__)


def upgrade() -> None:
    connection = op.get_bind()
    if connection.dialect.name != "sqlite":
        return
    loaded = connection.exec_driver_sql(
        "SELECT 1 FROM pragma_module_list WHERE name = 'vec0'"
    ).first()
    if loaded is None:
        log.warning("sqlite-vec is not loaded: the vector table is rebuilt when it next is")
        return
    copied = rechunk(connection)
    if copied is not None:
        log.info("vector table rebuilt in chunks of 16: %d vectors copied", copied)
