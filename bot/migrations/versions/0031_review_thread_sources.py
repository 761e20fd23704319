"""Review threads: a comment thread's review (GitHub's `pull_request_review_id`: dismissing
the review declines its comment threads too) and when GitHub last changed the root's text
as recorded (an older edit, or the root's creation delivered after a reply or an edit,
never replaces newer text). bot.lifecycle.reviews.

Revision ID: 0031_review_thread_sources
Revises: 0030_decision_version
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0031_review_thread_sources"
down_revision = "0030_decision_version"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("review_threads") as batch:
        batch.add_column(sa.Column("review_id", sa.BigInteger, nullable=True))
        batch.add_column(sa.Column("source_updated_at", sa.DateTime, nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("review_threads") as batch:
        batch.drop_column("source_updated_at")
        batch.drop_column("review_id")
