"""A held proposal has its own filing key: however it is confirmed, one issue.

Revision ID: 0009_pending_key
Revises: 0008_delivery_retries
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0009_pending_key"
down_revision = "0008_delivery_retries"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("chat_sessions") as batch:
        batch.add_column(sa.Column("pending_key", sa.String(64)))


def downgrade() -> None:
    with op.batch_alter_table("chat_sessions") as batch:
        batch.drop_column("pending_key")
