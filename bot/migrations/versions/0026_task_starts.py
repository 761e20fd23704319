"""How each task generation started, plan-first or coding, decided once by its first run
(bot/lifecycle/plan_store.py, TaskStart). No backfill: a generation under way decides at
its next run, as before; one with a plan follows its plan either way.

Revision ID: 0026_task_starts
Revises: 0025_chat_open_turns
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0026_task_starts"
down_revision = "0025_chat_open_turns"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "task_starts",
        sa.Column(
            "task_id",
            sa.Integer,
            sa.ForeignKey("tasks.id", ondelete="CASCADE"),
            primary_key=True,
        ),
        sa.Column("generation", sa.Integer, primary_key=True, autoincrement=False),
        sa.Column("plan_first", sa.Boolean, nullable=False),
        sa.Column("reason", sa.String(20), nullable=False),
        sa.Column("started_at", sa.DateTime, nullable=False),
    )


def downgrade() -> None:
    op.drop_table("task_starts")
