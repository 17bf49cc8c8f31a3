"""arena: battles, votes, meta

Revision ID: 0003
Revises: 0002
Create Date: 2026-11-30 10:00:00
"""
import sqlalchemy as sa
from alembic import op

revision = "0003"
down_revision = "0002"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "arena_battles",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("public_id", sa.String(length=64), nullable=False),
        sa.Column("task", sa.String(length=200), nullable=False),
        sa.Column("sample_id", sa.String(length=300), nullable=False),
        sa.Column("epoch", sa.Integer(), nullable=False),
        sa.Column("left_model", sa.String(length=500), nullable=False),
        sa.Column("right_model", sa.String(length=500), nullable=False),
        sa.Column("left_result_id", sa.Integer(), nullable=True),
        sa.Column("right_result_id", sa.Integer(), nullable=True),
        sa.Column("media", sa.JSON(), nullable=False),
        sa.Column("features", sa.JSON(), nullable=False),
        sa.Column("voter_hash", sa.String(length=64), nullable=False),
        sa.Column("ip_hash", sa.String(length=64), nullable=False),
        sa.Column("created_at", sa.DateTime(), nullable=False),
        sa.Column("expires_at", sa.DateTime(), nullable=False),
        sa.Column("voted_at", sa.DateTime(), nullable=True),
        sa.ForeignKeyConstraint(["left_result_id"], ["sample_results.id"], ondelete="SET NULL"),
        sa.ForeignKeyConstraint(["right_result_id"], ["sample_results.id"], ondelete="SET NULL"),
        sa.PrimaryKeyConstraint("id"),
        sa.UniqueConstraint("public_id"),
    )
    with op.batch_alter_table("arena_battles", schema=None) as batch_op:
        batch_op.create_index("ix_arena_battles_voter_created", ["voter_hash", "created_at"], unique=False)
        batch_op.create_index("ix_arena_battles_ip_created", ["ip_hash", "created_at"], unique=False)

    op.create_table(
        "arena_votes",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("battle_id", sa.Integer(), nullable=False),
        sa.Column("task", sa.String(length=200), nullable=False),
        sa.Column("sample_id", sa.String(length=300), nullable=False),
        sa.Column("left_model", sa.String(length=500), nullable=False),
        sa.Column("right_model", sa.String(length=500), nullable=False),
        sa.Column("outcome", sa.String(length=20), nullable=False),
        sa.Column("voter_hash", sa.String(length=64), nullable=False),
        sa.Column("ip_hash", sa.String(length=64), nullable=False),
        sa.Column("served_at", sa.DateTime(), nullable=False),
        sa.Column("created_at", sa.DateTime(), nullable=False),
        sa.Column("features", sa.JSON(), nullable=False),
        sa.Column("flagged", sa.Boolean(), nullable=False),
        sa.Column("flag_reason", sa.Text(), nullable=True),
        sa.ForeignKeyConstraint(["battle_id"], ["arena_battles.id"], ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("id"),
        sa.UniqueConstraint("battle_id"),
    )
    with op.batch_alter_table("arena_votes", schema=None) as batch_op:
        batch_op.create_index("ix_arena_votes_voter_created", ["voter_hash", "created_at"], unique=False)
        batch_op.create_index("ix_arena_votes_ip_created", ["ip_hash", "created_at"], unique=False)
        batch_op.create_index("ix_arena_votes_task", ["task"], unique=False)

    op.create_table(
        "arena_meta",
        sa.Column("key", sa.String(length=100), nullable=False),
        sa.Column("value", sa.Text(), nullable=False),
        sa.PrimaryKeyConstraint("key"),
    )


def downgrade() -> None:
    op.drop_table("arena_meta")
    with op.batch_alter_table("arena_votes", schema=None) as batch_op:
        batch_op.drop_index("ix_arena_votes_task")
        batch_op.drop_index("ix_arena_votes_ip_created")
        batch_op.drop_index("ix_arena_votes_voter_created")
    op.drop_table("arena_votes")
    with op.batch_alter_table("arena_battles", schema=None) as batch_op:
        batch_op.drop_index("ix_arena_battles_ip_created")
        batch_op.drop_index("ix_arena_battles_voter_created")
    op.drop_table("arena_battles")
