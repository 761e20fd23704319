"""A task's pull request that conflicts with its moved base: one row per (task, base
commit, head commit), the claim that makes every later delivery about it change nothing
(bot.lifecycle.base_models).

Revision ID: 0036_base_updates
Revises: 0035_ci_failing_checks
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects.postgresql import JSONB

revision = "0036_base_updates"
down_revision = "0035_ci_failing_checks"
branch_labels = None
depends_on = None

JSONType = sa.JSON().with_variant(JSONB(), "postgresql")


def upgrade() -> None:
    op.create_table(
        "base_updates",
        sa.Column("id", sa.Integer, primary_key=True),
        sa.Column(
            "task_id", sa.Integer, sa.ForeignKey("tasks.id", ondelete="CASCADE"), nullable=False
        ),
        sa.Column("generation", sa.Integer, nullable=False),
        sa.Column("pr_number", sa.Integer, nullable=False),
        sa.Column("base_ref", sa.String(255), nullable=False),
        sa.Column("base_sha", sa.String(64), nullable=False),
        sa.Column("head_sha", sa.String(64), nullable=False),
        sa.Column("chain_sha", sa.String(64), nullable=False),
        sa.Column("run_number", sa.Integer, nullable=False),
        sa.Column("verdict", sa.String(20), nullable=False),
        sa.Column("state", sa.String(20), nullable=False),
        sa.Column("reason", sa.Text, nullable=False),
        sa.Column("job_id", sa.String(100)),
        sa.Column("conflicts", JSONType, nullable=False),
        sa.Column("result_sha", sa.String(64)),
        sa.Column("created_at", sa.DateTime, nullable=False),
        sa.Column("updated_at", sa.DateTime, nullable=False),
        sa.UniqueConstraint("task_id", "base_sha", "head_sha", name="uq_base_updates_tips"),
    )
    op.create_index("ix_base_updates_task_id", "base_updates", ["task_id"])
    op.create_index("ix_base_updates_result_sha", "base_updates", ["result_sha"])


def downgrade() -> None:
    op.drop_index("ix_base_updates_result_sha", "base_updates")
    op.drop_index("ix_base_updates_task_id", "base_updates")
    op.drop_table("base_updates")
