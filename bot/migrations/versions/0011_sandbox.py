"""Coding runs in a sandbox: the issue text a task works from, and private run logs.

Revision ID: 0011_sandbox
Revises: 0010_web_sessions
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0011_sandbox"
down_revision = "0010_web_sessions"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("tasks") as batch:
        batch.add_column(sa.Column("issue_title", sa.Text))
        batch.add_column(sa.Column("issue_body", sa.Text))
        batch.add_column(sa.Column("pinned_at", sa.DateTime))
    op.create_table(
        "task_logs",
        sa.Column("id", sa.Integer, primary_key=True),
        sa.Column(
            "task_id", sa.Integer, sa.ForeignKey("tasks.id", ondelete="CASCADE"), nullable=False
        ),
        sa.Column("generation", sa.Integer, nullable=False),
        sa.Column("attempt", sa.Integer, nullable=False),
        sa.Column("holder", sa.String(200), nullable=False),
        sa.Column("status", sa.String(20), nullable=False),
        sa.Column("text", sa.Text, nullable=False),
        sa.Column("at", sa.DateTime, nullable=False),
    )
    op.create_index("ix_task_logs_task_id", "task_logs", ["task_id"])


def downgrade() -> None:
    op.drop_index("ix_task_logs_task_id", table_name="task_logs")
    op.drop_table("task_logs")
    with op.batch_alter_table("tasks") as batch:
        batch.drop_column("pinned_at")
        batch.drop_column("issue_body")
        batch.drop_column("issue_title")
