"""Failing CI on a task's pull request: one row per (task, head commit), the claim that
makes every delivery about it after the first change nothing (bot.lifecycle.ci_models).

Revision ID: 0021_ci_fix
Revises: 0020_review_runs_pickup
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0021_ci_fix"
down_revision = "0020_review_runs_pickup"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "ci_fixes",
        sa.Column("id", sa.Integer, primary_key=True),
        sa.Column(
            "task_id",
            sa.Integer,
            sa.ForeignKey("tasks.id", ondelete="CASCADE"),
            nullable=False,
        ),
        sa.Column("generation", sa.Integer, nullable=False),
        sa.Column("pr_number", sa.Integer, nullable=False),
        sa.Column("head_sha", sa.String(64), nullable=False),
        sa.Column("chain_sha", sa.String(64), nullable=False),
        sa.Column("run_number", sa.Integer, nullable=False),
        sa.Column("verdict", sa.String(20), nullable=False),
        sa.Column("state", sa.String(20), nullable=False),
        sa.Column("checks", sa.Text, nullable=False),
        sa.Column("reason", sa.Text, nullable=False),
        sa.Column("evidence", sa.Text, nullable=False),
        sa.Column("job_id", sa.String(100)),
        sa.Column("result_sha", sa.String(64)),
        sa.Column("created_at", sa.DateTime, nullable=False),
        sa.Column("updated_at", sa.DateTime, nullable=False),
        sa.UniqueConstraint("task_id", "head_sha", name="uq_ci_fixes_head"),
    )
    op.create_index("ix_ci_fixes_task_id", "ci_fixes", ["task_id"])
    op.create_index("ix_ci_fixes_result_sha", "ci_fixes", ["result_sha"])


def downgrade() -> None:
    op.drop_index("ix_ci_fixes_result_sha", "ci_fixes")
    op.drop_index("ix_ci_fixes_task_id", "ci_fixes")
    op.drop_table("ci_fixes")
