"""Plan-first tasks' plans, and each run's spend by repository and day (issue 34).

Revision ID: 0022_leverage_plans_spend
Revises: 0021_ci_fix
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0022_leverage_plans_spend"
down_revision = "0021_ci_fix"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "task_plans",
        sa.Column("id", sa.Integer, primary_key=True),
        sa.Column(
            "task_id", sa.Integer, sa.ForeignKey("tasks.id", ondelete="CASCADE"), nullable=False
        ),
        sa.Column("generation", sa.Integer, nullable=False),
        sa.Column("status", sa.String(20), nullable=False),
        sa.Column("text", sa.Text, nullable=False),
        sa.Column("brief", sa.Text),
        sa.Column("edited", sa.Boolean, nullable=False),
        sa.Column("decision_comment_id", sa.BigInteger),
        sa.Column("proposed_at", sa.DateTime, nullable=False),
        sa.Column("decided_at", sa.DateTime),
        sa.UniqueConstraint("task_id", "generation", name="uq_task_plans_task_gen"),
    )
    op.create_index("ix_task_plans_task_id", "task_plans", ["task_id"])
    op.create_table(
        "repo_spend",
        sa.Column("id", sa.Integer, primary_key=True),
        sa.Column("repo", sa.String(200), nullable=False),
        sa.Column(
            "task_id", sa.Integer, sa.ForeignKey("tasks.id", ondelete="CASCADE"), nullable=False
        ),
        sa.Column("at", sa.DateTime, nullable=False),
        sa.Column("tokens", sa.Integer, nullable=False),
        sa.Column("cost_usd", sa.Float, nullable=False),
    )
    op.create_index("ix_repo_spend_repo_at", "repo_spend", ["repo", "at"])


def downgrade() -> None:
    op.drop_index("ix_repo_spend_repo_at", "repo_spend")
    op.drop_table("repo_spend")
    op.drop_index("ix_task_plans_task_id", "task_plans")
    op.drop_table("task_plans")
