"""sample leases: which process works on which (run, sample, epoch)

Revision ID: 0006
Revises: 0005
Create Date: 2026-12-01 10:40:00
"""
import sqlalchemy as sa
from alembic import op

revision = "0006"
down_revision = "0005"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "sample_leases",
        sa.Column("run_id", sa.Integer(), nullable=False),
        sa.Column("sample_id", sa.String(length=300), nullable=False),
        sa.Column("epoch", sa.Integer(), nullable=False),
        sa.Column("owner", sa.String(length=200), nullable=False),
        sa.Column("expires_at", sa.DateTime(), nullable=False),
        sa.ForeignKeyConstraint(["run_id"], ["runs.id"], ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("run_id", "sample_id", "epoch"),
    )


def downgrade() -> None:
    op.drop_table("sample_leases")
