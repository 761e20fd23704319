"""Operators: when `steelframe operator revoke` last revoked the token (None: the token
works), so `operator list` can say so; `rotate` clears it.

Revision ID: 0033_operator_revoked_at
Revises: 0032_task_pickup_followed
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0033_operator_revoked_at"
down_revision = "0032_task_pickup_followed"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("operators") as batch:
        batch.add_column(sa.Column("revoked_at", sa.DateTime, nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("operators") as batch:
        batch.drop_column("revoked_at")
