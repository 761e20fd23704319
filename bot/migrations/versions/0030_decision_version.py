"""Chat sessions: the Decision draft's version, counted up by every write of the draft, so a
publish clears only the draft it answered, never one a turn wrote while it was posting
(bot.chat.proposals.decision_published).

Revision ID: 0030_decision_version
Revises: 0029_memory_source_updated_at
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0030_decision_version"
down_revision = "0029_memory_source_updated_at"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("chat_sessions") as batch:
        batch.add_column(
            sa.Column("decision_version", sa.Integer, nullable=False, server_default="0")
        )


def downgrade() -> None:
    with op.batch_alter_table("chat_sessions") as batch:
        batch.drop_column("decision_version")
