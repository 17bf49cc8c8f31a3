"""owners: runs, tasks and models belong to the operator ('') or to the push token that wrote them

A run name, a task's (name, version, content hash) and a model spec become unique per owner instead
of globally, so a push can never create the row the operator's own ``harness eval`` later joins.
``run_owners`` (which token pushed a run) becomes the run's ``owner`` column. Existing rows: a run
pushed by a non-admin token belongs to that token; a task or model row whose every run belongs to
one such token belongs to it too; everything else is the operator's, as before.

SQLite rebuilds the three tables (batch mode); env.py turns foreign-key enforcement off around
migrations, because dropping the old ``runs`` table with it on would cascade into every sample row.

Revision ID: 0009
Revises: 0008
Create Date: 2026-12-02 09:00:00
"""
import sqlalchemy as sa
from alembic import op

revision = "0009"
down_revision = "0008"
branch_labels = None
depends_on = None

# (table, old unique columns, new constraint name, new unique columns)
UNIQUES = [
    ("models", ["spec"], "uq_models_spec_owner", ["spec", "owner"]),
    ("tasks", ["name", "version", "content_hash"], "uq_tasks_identity_owner",
     ["name", "version", "content_hash", "owner"]),
    ("runs", ["name"], "uq_runs_name_owner", ["name", "owner"]),
]
# SQLite keeps the old constraints unnamed: batch mode names them by this convention when it reflects them
_SQLITE_NAMES = {"uq": "uq_%(table_name)s_%(column_0_name)s"}


def _unique_name(table: str, columns: list[str]) -> str:
    """The old constraint's name: its own (PostgreSQL's ``runs_name_key``, or one a downgrade gave it),
    or for SQLite's unnamed original the one batch mode's naming convention gives it."""
    for u in sa.inspect(op.get_bind()).get_unique_constraints(table):
        if list(u["column_names"]) == columns:
            return str(u["name"]) if u["name"] else f"uq_{table}_{columns[0]}"
    raise RuntimeError(f"migration 0009: no unique constraint on {table}({', '.join(columns)}) to replace")


def upgrade() -> None:
    for table, old, new_name, new in UNIQUES:
        old_name = _unique_name(table, old)
        with op.batch_alter_table(table, naming_convention=_SQLITE_NAMES) as batch:
            batch.add_column(sa.Column("owner", sa.String(length=200), nullable=False, server_default=""))
            batch.drop_constraint(old_name, type_="unique")
            batch.create_unique_constraint(new_name, new)
    # a run pushed by a push-scope token is that token's; admin and static pushes are the operator's
    op.execute(
        "UPDATE runs SET owner = (SELECT o.token_name FROM run_owners o WHERE o.run_id = runs.id) "
        "WHERE EXISTS (SELECT 1 FROM run_owners o WHERE o.run_id = runs.id AND o.token_name <> 'static' "
        "AND NOT EXISTS (SELECT 1 FROM api_tokens t WHERE t.name = o.token_name AND t.scope = 'admin'))"
    )
    for table, column in (("tasks", "task_id"), ("models", "model_id")):
        op.execute(
            f"UPDATE {table} SET owner = (SELECT MIN(r.owner) FROM runs r WHERE r.{column} = {table}.id) "
            f"WHERE (SELECT COUNT(DISTINCT r.owner) FROM runs r WHERE r.{column} = {table}.id) = 1 "
            f"AND (SELECT MIN(r.owner) FROM runs r WHERE r.{column} = {table}.id) <> ''"
        )
    op.drop_table("run_owners")


def downgrade() -> None:
    bind = op.get_bind()
    for table, old, _, _ in UNIQUES:
        cols = ", ".join(old)
        dup = bind.execute(sa.text(f"SELECT {cols} FROM {table} GROUP BY {cols} HAVING COUNT(*) > 1")).first()
        if dup is not None:
            raise RuntimeError(f"cannot downgrade below 0009: two owners share {table} {tuple(dup)!r}; "
                               "rename or delete one first")
    op.create_table(
        "run_owners",
        sa.Column("run_id", sa.Integer(), nullable=False),
        sa.Column("token_name", sa.String(length=200), nullable=False),
        sa.ForeignKeyConstraint(["run_id"], ["runs.id"], ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("run_id"),
    )
    op.execute("INSERT INTO run_owners (run_id, token_name) SELECT id, owner FROM runs WHERE owner <> ''")
    for table, old, new_name, _ in reversed(UNIQUES):
        with op.batch_alter_table(table) as batch:
            batch.drop_constraint(new_name, type_="unique")
            # the name PostgreSQL gave the original (unnamed) constraint
            batch.create_unique_constraint(f"{table}_{'_'.join(old)}_key", old)
            batch.drop_column("owner")
