"""Webhook deliveries are retried and dead-lettered; claims name their owner.

Revision ID: 0008_delivery_retries
Revises: 0007_fault_tolerance
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0008_delivery_retries"
down_revision = "0007_fault_tolerance"
branch_labels = None
depends_on = None


def upgrade() -> None:
    # Per-handler outcomes (a retry runs only the failed ones), when the next attempt is due,
    # and which process holds a claim (claims expire in seconds, renewed while it works).
    with op.batch_alter_table("github_deliveries") as batch:
        batch.add_column(sa.Column("claimed_by", sa.String(40)))
        batch.add_column(sa.Column("next_attempt_at", sa.DateTime))
        batch.add_column(sa.Column("outcomes", sa.Text))
    # `failed` was final and nothing retried it: those deliveries are dead letters now.
    op.execute("UPDATE github_deliveries SET status = 'dead' WHERE status = 'failed'")


def downgrade() -> None:
    op.execute("UPDATE github_deliveries SET status = 'failed' WHERE status IN ('dead', 'retrying')")
    with op.batch_alter_table("github_deliveries") as batch:
        batch.drop_column("outcomes")
        batch.drop_column("next_attempt_at")
        batch.drop_column("claimed_by")
