"""Requests a coding run's egress proxy refused, once per host per run (issue 36).

Revision ID: 0017_egress_blocked
Revises: 0016_owed_resyncs
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0017_egress_blocked"
down_revision = "0016_owed_resyncs"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "egress_blocked",
        sa.Column("id", sa.Integer, primary_key=True),
        sa.Column(
            "task_id",
            sa.Integer,
            sa.ForeignKey("tasks.id", ondelete="CASCADE"),
            nullable=False,
        ),
        sa.Column("generation", sa.Integer, nullable=False),
        sa.Column("attempt", sa.Integer, nullable=False),
        sa.Column("host", sa.String(255), nullable=False),
        sa.Column("port", sa.Integer, nullable=False),
        sa.Column("count", sa.Integer, nullable=False),
        sa.Column("reason", sa.String(300), nullable=False),
        sa.Column("first_at", sa.DateTime, nullable=False),
        sa.UniqueConstraint("task_id", "generation", "attempt", "host", name="uq_egress_blocked"),
    )
    op.create_index("ix_egress_blocked_task_id", "egress_blocked", ["task_id"])


def downgrade() -> None:
    op.drop_index("ix_egress_blocked_task_id", "egress_blocked")
    op.drop_table("egress_blocked")
