"""Tasks: the newest pickup webhook a task followed (GitHub's time of the change) and
whether GitHub has since shown its issue closed or without a pickup label, so a pickup
webhook sent again changes nothing while a new one in the same second still counts
(bot.lifecycle.pickup_signal). A task that exists already is taken to have followed
everything up to its last change.

Revision ID: 0032_task_pickup_followed
Revises: 0031_review_thread_sources
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0032_task_pickup_followed"
down_revision = "0031_review_thread_sources"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("tasks") as batch:
        batch.add_column(sa.Column("pickup_followed_at", sa.DateTime, nullable=True))
        batch.add_column(
            sa.Column("pickup_rearmed", sa.Boolean, nullable=False, server_default=sa.false())
        )
    op.execute("UPDATE tasks SET pickup_followed_at = updated_at")


def downgrade() -> None:
    with op.batch_alter_table("tasks") as batch:
        batch.drop_column("pickup_rearmed")
        batch.drop_column("pickup_followed_at")
