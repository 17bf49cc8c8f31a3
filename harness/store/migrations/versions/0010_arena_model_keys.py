"""arena: stable model keys on battles and votes, pool health, failed live replies

Votes were stored under a model's display label only, and a label can change (a second spec with
the same short name gives both a suffix), which split one model's votes in two. Battles and votes
now also carry the model's stable key: ``model:<models.id>`` for a stored run's model,
``pool:<arena_pool.id>`` for a live pool entry, ``label:<label>`` where neither can be found.

Back-fill: a stored battle's key comes from its result row's run; a live battle's from the pool
entry of that label (if it is still there); every other battle keeps its label as ``label:...``;
each vote takes its battle's keys. The pool gets its health columns, and ``arena_failures`` one
row per failed live reply (counted per model, never rated).

Revision ID: 0010
Revises: 0009
Create Date: 2026-12-03 10:00:00
"""
import sqlalchemy as sa
from alembic import op

revision = "0010"
down_revision = "0009"
branch_labels = None
depends_on = None


def _backfill() -> None:
    for side in ("left", "right"):
        op.execute(
            f"UPDATE arena_battles SET {side}_key = (SELECT 'model:' || CAST(r.model_id AS VARCHAR) "
            f"FROM sample_results sr JOIN runs r ON r.id = sr.run_id WHERE sr.id = arena_battles.{side}_result_id) "
            f"WHERE {side}_result_id IS NOT NULL"
        )
        op.execute(
            f"UPDATE arena_battles SET {side}_key = (SELECT 'pool:' || CAST(p.id AS VARCHAR) FROM arena_pool p "
            f"WHERE p.label = arena_battles.{side}_model) "
            f"WHERE {side}_key IS NULL AND id IN (SELECT c.battle_id FROM arena_chats c)"
        )
        op.execute(f"UPDATE arena_battles SET {side}_key = 'label:' || {side}_model WHERE {side}_key IS NULL")
        op.execute(
            f"UPDATE arena_votes SET {side}_key = COALESCE((SELECT b.{side}_key FROM arena_battles b "
            f"WHERE b.id = arena_votes.battle_id), 'label:' || {side}_model)"
        )


def upgrade() -> None:
    with op.batch_alter_table("arena_battles", schema=None) as batch_op:
        batch_op.add_column(sa.Column("left_key", sa.String(length=100), nullable=True))
        batch_op.add_column(sa.Column("right_key", sa.String(length=100), nullable=True))
    with op.batch_alter_table("arena_votes", schema=None) as batch_op:
        batch_op.add_column(sa.Column("left_key", sa.String(length=100), nullable=False, server_default=""))
        batch_op.add_column(sa.Column("right_key", sa.String(length=100), nullable=False, server_default=""))
    with op.batch_alter_table("arena_pool", schema=None) as batch_op:
        batch_op.add_column(sa.Column("probed_at", sa.DateTime(), nullable=True))
        batch_op.add_column(sa.Column("probe_error", sa.Text(), nullable=True))
        batch_op.add_column(sa.Column("last_ok_at", sa.DateTime(), nullable=True))
        batch_op.add_column(sa.Column("last_error_at", sa.DateTime(), nullable=True))
        batch_op.add_column(sa.Column("last_error", sa.Text(), nullable=True))
        batch_op.add_column(sa.Column("failures_in_row", sa.Integer(), nullable=False, server_default="0"))
    op.create_table(
        "arena_failures",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("battle_id", sa.Integer(), nullable=False),
        sa.Column("task", sa.String(length=200), nullable=False),
        sa.Column("model_key", sa.String(length=100), nullable=False),
        sa.Column("model_label", sa.String(length=500), nullable=False),
        sa.Column("side", sa.String(length=1), nullable=False),
        sa.Column("turn", sa.Integer(), nullable=False),
        sa.Column("kind", sa.String(length=40), nullable=False),
        sa.Column("created_at", sa.DateTime(), nullable=False),
        sa.ForeignKeyConstraint(["battle_id"], ["arena_battles.id"], ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("id"),
    )
    op.create_index("ix_arena_failures_battle_id", "arena_failures", ["battle_id"])
    op.create_index("ix_arena_failures_model_created", "arena_failures", ["model_key", "created_at"])
    _backfill()


def downgrade() -> None:
    op.drop_index("ix_arena_failures_model_created", table_name="arena_failures")
    op.drop_index("ix_arena_failures_battle_id", table_name="arena_failures")
    op.drop_table("arena_failures")
    with op.batch_alter_table("arena_pool", schema=None) as batch_op:
        for column in ("failures_in_row", "last_error", "last_error_at", "last_ok_at", "probe_error", "probed_at"):
            batch_op.drop_column(column)
    with op.batch_alter_table("arena_votes", schema=None) as batch_op:
        batch_op.drop_column("right_key")
        batch_op.drop_column("left_key")
    with op.batch_alter_table("arena_battles", schema=None) as batch_op:
        batch_op.drop_column("right_key")
        batch_op.drop_column("left_key")
