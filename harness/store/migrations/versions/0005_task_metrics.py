"""task metric declarations: tasks.metrics (name -> direction, scale, display)

Revision ID: 0005
Revises: 0004
Create Date: 2026-12-01 10:30:00
"""
import sqlalchemy as sa
from alembic import op

revision = "0005"
down_revision = "0004"
branch_labels = None
depends_on = None


def upgrade() -> None:
    # rows written before this migration declare nothing: an empty object, so every metric of an
    # old task reads as of unknown direction (shown, never ranked) until the task is run again
    with op.batch_alter_table("tasks") as batch:
        batch.add_column(sa.Column("metrics", sa.JSON(), nullable=False, server_default=sa.text("'{}'")))


def downgrade() -> None:
    with op.batch_alter_table("tasks") as batch:
        batch.drop_column("metrics")
