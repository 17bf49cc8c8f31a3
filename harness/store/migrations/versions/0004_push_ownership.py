"""push ownership: token scopes and which token owns each pushed run

Revision ID: 0004
Revises: 0003
Create Date: 2026-12-01 10:00:00
"""
import sqlalchemy as sa
from alembic import op

revision = "0004"
down_revision = "0003"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("api_tokens") as batch:
        batch.add_column(sa.Column("scope", sa.String(length=20), nullable=False, server_default="push"))
    op.create_table(
        "run_owners",
        sa.Column("run_id", sa.Integer(), nullable=False),
        sa.Column("token_name", sa.String(length=200), nullable=False),
        sa.ForeignKeyConstraint(["run_id"], ["runs.id"], ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("run_id"),
    )


def downgrade() -> None:
    op.drop_table("run_owners")
    with op.batch_alter_table("api_tokens") as batch:
        batch.drop_column("scope")
