"""A base update's stop comment, once GitHub has it: `base_updates.comment_id`. A stop whose
comment GitHub refused is posted by the reconciler's pass (no base move reads a task
waiting for a person).

Revision ID: 0037_base_update_comments
Revises: 0036_base_updates
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0037_base_update_comments"
down_revision = "0036_base_updates"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column("base_updates", sa.Column("comment_id", sa.BigInteger))


def downgrade() -> None:
    with op.batch_alter_table("base_updates") as batch:
        batch.drop_column("comment_id")
