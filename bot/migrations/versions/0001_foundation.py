"""Foundation: operators, agents, chat sessions, chat turns.

Revision ID: 0001_foundation
Revises:
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects.postgresql import JSONB

revision = "0001_foundation"
down_revision = None
branch_labels = None
depends_on = None

JSONType = sa.JSON().with_variant(JSONB(), "postgresql")


def upgrade() -> None:
    op.create_table(
        "operators",
        sa.Column("id", sa.Integer, primary_key=True),
        sa.Column("name", sa.String(100), nullable=False, unique=True),
        sa.Column("token_hash", sa.String(64), nullable=False, unique=True),
        sa.Column("created_at", sa.DateTime, nullable=False),
        sa.Column("active_session_id", sa.String(32)),
    )
    op.create_table(
        "agents",
        sa.Column("name", sa.String(100), primary_key=True),
        sa.Column("repo", sa.String(200), nullable=False),
        sa.Column("checkout", sa.Text, nullable=False),
        sa.Column("runtime", sa.String(40), nullable=False),
        sa.Column("updated_at", sa.DateTime, nullable=False),
    )
    op.create_table(
        "chat_sessions",
        sa.Column("id", sa.String(32), primary_key=True),
        sa.Column(
            "operator_id",
            sa.Integer,
            sa.ForeignKey("operators.id", ondelete="CASCADE"),
            nullable=False,
        ),
        sa.Column("agent", sa.String(100), sa.ForeignKey("agents.name"), nullable=False),
        sa.Column("kind", sa.String(20), nullable=False),
        sa.Column("title", sa.String(200)),
        sa.Column("focus_issue", sa.Integer),
        sa.Column("created_at", sa.DateTime, nullable=False),
        sa.Column("last_activity_at", sa.DateTime, nullable=False),
        sa.Column("closed_at", sa.DateTime),
        sa.Column("summary", sa.Text),
        sa.Column("summary_status", sa.String(20), nullable=False),
        sa.Column("decision_body", sa.Text),
        sa.Column("decision_issue", sa.Integer),
        sa.Column("pending_title", sa.String(300)),
        sa.Column("pending_body", sa.Text),
    )
    op.create_index(
        "ix_chat_sessions_operator_activity", "chat_sessions", ["operator_id", "last_activity_at"]
    )
    op.create_table(
        "chat_turns",
        sa.Column("id", sa.String(64), primary_key=True),
        sa.Column(
            "session_id",
            sa.String(32),
            sa.ForeignKey("chat_sessions.id", ondelete="CASCADE"),
            nullable=False,
        ),
        sa.Column("seq", sa.Integer, nullable=False),
        sa.Column("role", sa.String(20), nullable=False),
        sa.Column("content", sa.Text, nullable=False),
        sa.Column("reasoning", sa.Text),
        sa.Column("intent", sa.String(40)),
        sa.Column("meta", JSONType, nullable=False),
        sa.Column("created_at", sa.DateTime, nullable=False),
        sa.UniqueConstraint("session_id", "seq", name="uq_chat_turns_session_seq"),
    )
    op.create_index("ix_chat_turns_session_id", "chat_turns", ["session_id"])


def downgrade() -> None:
    op.drop_table("chat_turns")
    op.drop_index("ix_chat_sessions_operator_activity", table_name="chat_sessions")
    op.drop_table("chat_sessions")
    op.drop_table("agents")
    op.drop_table("operators")
