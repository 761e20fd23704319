"""The coding agent of each run's spend, for the estimate from similar past runs (issue 34).

Revision ID: 0024_leverage2_spend_agent
Revises: 0023_newcomer_results_seen
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0024_leverage2_spend_agent"
down_revision = "0023_newcomer_results_seen"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("repo_spend") as batch:
        batch.add_column(sa.Column("agent", sa.String(40)))


def downgrade() -> None:
    with op.batch_alter_table("repo_spend") as batch:
        batch.drop_column("agent")
