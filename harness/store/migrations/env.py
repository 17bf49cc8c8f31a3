"""Alembic environment: the engine comes from harness.store.db (never from an ini file)."""

from alembic import context

from harness.store.db import make_engine
from harness.store.schema import Base

config = context.config
engine = config.attributes.get("engine") or make_engine(config.get_main_option("sqlalchemy.url"))

with engine.begin() as connection:
    context.configure(
        connection=connection,
        target_metadata=Base.metadata,
        render_as_batch=connection.dialect.name == "sqlite",  # ALTER TABLE on SQLite
    )
    with context.begin_transaction():
        context.run_migrations()
