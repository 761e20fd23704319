"""Resyncs owed to operators who missed events, recorded so they outlive their process.

Revision ID: 0016_owed_resyncs
Revises: 0015_sqlite_body_lz4
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0016_owed_resyncs"
down_revision = "0015_sqlite_body_lz4"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "owed_resyncs",
        sa.Column("id", sa.Integer, primary_key=True),
        sa.Column(
            "operator_id",
            sa.Integer,
            sa.ForeignKey("operators.id", ondelete="CASCADE"),
            nullable=False,
        ),
        sa.Column("missed_at", sa.DateTime, nullable=False),
        sqlite_autoincrement=True,  # ids never reused: see bot.models.OwedResync
    )
    op.create_index("ix_owed_resyncs_operator_id", "owed_resyncs", ["operator_id"])


def downgrade() -> None:
    op.drop_index("ix_owed_resyncs_operator_id", "owed_resyncs")
    op.drop_table("owed_resyncs")
