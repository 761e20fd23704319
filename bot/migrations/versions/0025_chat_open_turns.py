"""Chat turns acknowledged but not yet stored, so a process killed mid-turn leaves them
for the next start to note in their sessions (bot/chat/open_turn_rows.py).

Revision ID: 0025_chat_open_turns
Revises: 0024_leverage2_spend_agent
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0025_chat_open_turns"
down_revision = "0024_leverage2_spend_agent"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "chat_open_turns",
        sa.Column("turn_id", sa.String(32), primary_key=True),
        sa.Column(
            "operator_id",
            sa.Integer,
            sa.ForeignKey("operators.id", ondelete="CASCADE"),
            nullable=False,
        ),
        sa.Column(
            "session_id",
            sa.String(32),
            sa.ForeignKey("chat_sessions.id", ondelete="CASCADE"),
            nullable=False,
        ),
        sa.Column("message", sa.Text, nullable=False),
        sa.Column("started_at", sa.DateTime, nullable=False),
    )
    op.create_index("ix_chat_open_turns_session_id", "chat_open_turns", ["session_id"])


def downgrade() -> None:
    op.drop_index("ix_chat_open_turns_session_id", table_name="chat_open_turns")
    op.drop_table("chat_open_turns")
