"""After the pull request: the review thread ledger and the acknowledgements of reviews.
(The final task states `merged` and `closed` need no schema change: `tasks.state` is text.)

Revision ID: 0018_pr_final_states
Revises: 0017_egress_blocked
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0018_pr_final_states"
down_revision = "0017_egress_blocked"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "review_threads",
        sa.Column("id", sa.Integer, primary_key=True),
        sa.Column("task_id", sa.Integer, _task(), nullable=False),
        sa.Column("kind", sa.String(20), nullable=False),
        sa.Column("root_id", sa.BigInteger, nullable=False),
        sa.Column("pr_number", sa.Integer, nullable=False),
        sa.Column("path", sa.Text),
        sa.Column("line", sa.Integer),
        sa.Column("author", sa.String(100), nullable=False),
        sa.Column("state", sa.String(20), nullable=False),
        sa.Column("commit", sa.String(64)),
        sa.Column("reason", sa.Text),
        sa.Column("text", sa.Text, nullable=False),
        sa.Column("url", sa.Text),
        sa.Column("created_at", sa.DateTime, nullable=False),
        sa.Column("updated_at", sa.DateTime, nullable=False),
        sa.UniqueConstraint("task_id", "kind", "root_id", name="uq_review_threads_root"),
    )
    op.create_index("ix_review_threads_task_id", "review_threads", ["task_id"])
    op.create_table(
        "review_acks",
        sa.Column("kind", sa.String(20), primary_key=True),
        sa.Column("github_id", sa.BigInteger, primary_key=True, autoincrement=False),
        sa.Column("task_id", sa.Integer, _task(), nullable=False),
        sa.Column("answer_id", sa.BigInteger),
        sa.Column("at", sa.DateTime, nullable=False),
    )
    op.create_index("ix_review_acks_task_id", "review_acks", ["task_id"])


def _task() -> sa.ForeignKey:
    return sa.ForeignKey("tasks.id", ondelete="CASCADE")


def downgrade() -> None:
    op.drop_index("ix_review_acks_task_id", "review_acks")
    op.drop_table("review_acks")
    op.drop_index("ix_review_threads_task_id", "review_threads")
    op.drop_table("review_threads")
