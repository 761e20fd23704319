"""A held proposal remembers whether it was work or a memory.

Revision ID: 0006_pending_kind
Revises: 0005_side_effects
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0006_pending_kind"
down_revision = "0005_side_effects"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("chat_sessions") as batch:
        batch.add_column(sa.Column("pending_kind", sa.String(20)))


def downgrade() -> None:
    with op.batch_alter_table("chat_sessions") as batch:
        batch.drop_column("pending_kind")
