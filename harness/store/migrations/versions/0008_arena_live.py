"""arena live: the model pool, live conversations, categories on battles and votes

Revision ID: 0008
Revises: 0007
Create Date: 2026-12-01 13:00:00
"""
import sqlalchemy as sa
from alembic import op

revision = "0008"
down_revision = "0007"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "arena_pool",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("label", sa.String(length=500), nullable=False),
        sa.Column("spec", sa.String(length=500), nullable=False),
        sa.Column("settings", sa.JSON(), nullable=False),
        sa.Column("kinds", sa.JSON(), nullable=False),
        sa.Column("enabled", sa.Boolean(), nullable=False),
        sa.Column("created_at", sa.DateTime(), nullable=False),
        sa.PrimaryKeyConstraint("id"),
        sa.UniqueConstraint("label"),
    )
    op.create_table(
        "arena_chats",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("battle_id", sa.Integer(), nullable=False),
        sa.Column("kind", sa.String(length=20), nullable=False),
        sa.Column("turns", sa.JSON(), nullable=False),
        sa.Column("n_turns", sa.Integer(), nullable=False),
        sa.Column("busy", sa.Boolean(), nullable=False),
        sa.Column("created_at", sa.DateTime(), nullable=False),
        sa.Column("updated_at", sa.DateTime(), nullable=False),
        sa.ForeignKeyConstraint(["battle_id"], ["arena_battles.id"], ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("id"),
        sa.UniqueConstraint("battle_id"),
    )
    with op.batch_alter_table("arena_battles", schema=None) as batch_op:
        batch_op.add_column(sa.Column("categories", sa.JSON(), nullable=True))
    with op.batch_alter_table("arena_votes", schema=None) as batch_op:
        batch_op.add_column(sa.Column("categories", sa.JSON(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("arena_votes", schema=None) as batch_op:
        batch_op.drop_column("categories")
    with op.batch_alter_table("arena_battles", schema=None) as batch_op:
        batch_op.drop_column("categories")
    op.drop_table("arena_chats")
    op.drop_table("arena_pool")
