"""Review runs (branch review-runs): which run picked each review thread up, when, and the
thread's text as that run was given it (`bot.lifecycle.review_run`).

Revision ID: 0020_review_runs_pickup
Revises: 0019_delivery_content_key
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0020_review_runs_pickup"
down_revision = "0019_delivery_content_key"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("review_threads") as batch:
        batch.add_column(sa.Column("picked_job", sa.String(100), nullable=True))
        batch.add_column(sa.Column("picked_at", sa.DateTime, nullable=True))
        batch.add_column(sa.Column("pinned", sa.Text, nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("review_threads") as batch:
        batch.drop_column("pinned")
        batch.drop_column("picked_at")
        batch.drop_column("picked_job")
