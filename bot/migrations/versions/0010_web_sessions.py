"""Browser sign-ins for the web GUI: cookie digests paired with CSRF tokens.

Revision ID: 0010_web_sessions
Revises: 0009_pending_key
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0010_web_sessions"
down_revision = "0009_pending_key"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "web_sessions",
        sa.Column("token_hash", sa.String(64), primary_key=True),
        sa.Column(
            "operator_id",
            sa.Integer,
            sa.ForeignKey("operators.id", ondelete="CASCADE"),
            nullable=False,
        ),
        sa.Column("csrf_token", sa.String(64), nullable=False),
        sa.Column("created_at", sa.DateTime, nullable=False),
        sa.Column("expires_at", sa.DateTime, nullable=False),
    )
    op.create_index("ix_web_sessions_operator_id", "web_sessions", ["operator_id"])


def downgrade() -> None:
    op.drop_index("ix_web_sessions_operator_id", "web_sessions")
    op.drop_table("web_sessions")
