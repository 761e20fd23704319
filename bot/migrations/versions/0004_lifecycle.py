"""Task lifecycle: tasks, task events, run leases, notices, chat deliveries.

Revision ID: 0004_lifecycle
Revises: 0003_github
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects.postgresql import JSONB

revision = "0004_lifecycle"
down_revision = "0003_github"
branch_labels = None
depends_on = None

JSONType = sa.JSON().with_variant(JSONB(), "postgresql")


def upgrade() -> None:
    op.create_table(
        "tasks",
        sa.Column("id", sa.Integer, primary_key=True),
        sa.Column("repo", sa.String(200), nullable=False),
        sa.Column("issue", sa.Integer, nullable=False),
        sa.Column("title", sa.String(300), nullable=False),
        sa.Column("state", sa.String(20), nullable=False),
        sa.Column("archived", sa.Boolean, nullable=False),
        sa.Column("origin_session", sa.String(32)),
        sa.Column("generation", sa.Integer, nullable=False),
        sa.Column("attempts", sa.Integer, nullable=False),
        sa.Column("job_id", sa.String(100)),
        sa.Column("branch", sa.String(200)),
        sa.Column("pushed_at", sa.DateTime),
        sa.Column("pr_number", sa.Integer),
        sa.Column("pr_url", sa.Text),
        sa.Column("progress_comment_id", sa.BigInteger),
        sa.Column("runtime_session", sa.String(200)),
        sa.Column("runtime_transcript", sa.Text),
        sa.Column("question", sa.Text),
        sa.Column("pending_decision", sa.Text),
        sa.Column("decision_comment_id", sa.BigInteger),
        sa.Column("tokens_used", sa.Integer, nullable=False),
        sa.Column("cost_usd", sa.Float, nullable=False),
        sa.Column("runtime_seconds", sa.Float, nullable=False),
        sa.Column("last_error", sa.Text),
        sa.Column("summary", sa.Text),
        sa.Column("created_at", sa.DateTime, nullable=False),
        sa.Column("updated_at", sa.DateTime, nullable=False),
        sa.UniqueConstraint("repo", "issue", name="uq_tasks_repo_issue"),
    )
    op.create_index("ix_tasks_state_updated", "tasks", ["state", "updated_at"])
    op.create_table(
        "task_events",
        sa.Column("id", sa.Integer, primary_key=True),
        sa.Column(
            "task_id", sa.Integer, sa.ForeignKey("tasks.id", ondelete="CASCADE"), nullable=False
        ),
        sa.Column("kind", sa.String(40), nullable=False),
        sa.Column("from_state", sa.String(20)),
        sa.Column("to_state", sa.String(20)),
        sa.Column("actor", sa.String(200), nullable=False),
        sa.Column("detail", sa.Text, nullable=False),
        sa.Column("data", JSONType, nullable=False),
        sa.Column("at", sa.DateTime, nullable=False),
    )
    op.create_index("ix_task_events_task_id", "task_events", ["task_id"])
    op.create_table(
        "task_leases",
        sa.Column(
            "task_id", sa.Integer, sa.ForeignKey("tasks.id", ondelete="CASCADE"), primary_key=True
        ),
        sa.Column("holder", sa.String(200), nullable=False),
        sa.Column("host", sa.String(255), nullable=False),
        sa.Column("pid", sa.Integer, nullable=False),
        sa.Column("child_pgid", sa.Integer),
        sa.Column("worktree", sa.Text),
        sa.Column("acquired_at", sa.DateTime, nullable=False),
        sa.Column("heartbeat_at", sa.DateTime, nullable=False),
        sa.Column("expires_at", sa.DateTime, nullable=False),
    )
    op.create_table(
        "task_notices",
        sa.Column("id", sa.Integer, primary_key=True),
        sa.Column(
            "task_id", sa.Integer, sa.ForeignKey("tasks.id", ondelete="CASCADE"), nullable=False
        ),
        sa.Column("key", sa.String(100), nullable=False),
        sa.Column("body", sa.Text, nullable=False),
        sa.Column("comment_id", sa.BigInteger),
        sa.Column("created_at", sa.DateTime, nullable=False),
        sa.Column("posted_at", sa.DateTime),
        sa.UniqueConstraint("task_id", "key", name="uq_task_notices_key"),
    )
    op.create_table(
        "chat_deliveries",
        sa.Column("id", sa.String(64), primary_key=True),
        sa.Column(
            "task_id", sa.Integer, sa.ForeignKey("tasks.id", ondelete="CASCADE"), nullable=False
        ),
        sa.Column(
            "event_id",
            sa.Integer,
            sa.ForeignKey("task_events.id", ondelete="CASCADE"),
            nullable=False,
            unique=True,
        ),
        sa.Column("session_id", sa.String(32), nullable=False),
        sa.Column("state", sa.String(20), nullable=False),
        sa.Column("outcome", sa.String(20), nullable=False),
        sa.Column("at", sa.DateTime, nullable=False),
    )
    op.create_index("ix_chat_deliveries_task_id", "chat_deliveries", ["task_id"])


def downgrade() -> None:
    op.drop_index("ix_chat_deliveries_task_id", table_name="chat_deliveries")
    op.drop_table("chat_deliveries")
    op.drop_table("task_notices")
    op.drop_table("task_leases")
    op.drop_index("ix_task_events_task_id", table_name="task_events")
    op.drop_table("task_events")
    op.drop_index("ix_tasks_state_updated", table_name="tasks")
    op.drop_table("tasks")
