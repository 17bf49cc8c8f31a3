"""Alembic environment: the engine comes from harness.store.db (never from an ini file).

On SQLite, foreign keys are not enforced while migrations run: batch mode rebuilds a table by
copying it and dropping the original, and with enforcement on that DROP would run the ``ON DELETE
CASCADE`` of every table referencing it (rebuilding ``runs`` would delete every sample). The check
afterwards refuses a migration that left a dangling reference.
"""

from alembic import context

from harness.store.db import make_engine
from harness.store.schema import Base

config = context.config
engine = config.attributes.get("engine") or make_engine(config.get_main_option("sqlalchemy.url"))

with engine.connect() as connection:
    sqlite = connection.dialect.name == "sqlite"
    if sqlite:  # a PRAGMA that changes enforcement is ignored inside a transaction: before it begins
        connection.exec_driver_sql("PRAGMA foreign_keys=OFF")
        connection.commit()
    try:
        with connection.begin():
            context.configure(
                connection=connection,
                target_metadata=Base.metadata,
                render_as_batch=sqlite,  # ALTER TABLE on SQLite
            )
            with context.begin_transaction():
                context.run_migrations()
            if sqlite and (bad := connection.exec_driver_sql("PRAGMA foreign_key_check").fetchall()):
                raise RuntimeError(f"migration left rows referencing missing rows: {bad[:5]}")
    finally:
        if sqlite:
            connection.exec_driver_sql("PRAGMA foreign_keys=ON")
            connection.commit()
