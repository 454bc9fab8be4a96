"""Alembic's environment: run the revisions on the connection omniroute.core.db.migrate hands over.

That connection is already in the transaction (and holds the lock) that makes a migration
run safe beside another process's, so Alembic begins no transaction of its own.
"""

from alembic import context

context.configure(connection=context.config.attributes["connection"])
with context.begin_transaction():
    context.run_migrations()
