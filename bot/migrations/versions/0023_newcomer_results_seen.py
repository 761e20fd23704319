"""When the operator last saw a session's task results: the sidebar's "new result" dot is
kept on the server (per operator and session), so it survives a reload and shows in every
tab (`bot/chat/unseen.py`).

Revision ID: 0023_newcomer_results_seen
Revises: 0022_leverage_plans_spend
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0023_newcomer_results_seen"
down_revision = "0022_leverage_plans_spend"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("chat_sessions") as batch:
        batch.add_column(sa.Column("results_seen_at", sa.DateTime))
    # What was there before this revision counts as seen: no old session lights up at once.
    op.execute("UPDATE chat_sessions SET results_seen_at = last_activity_at")


def downgrade() -> None:
    with op.batch_alter_table("chat_sessions") as batch:
        batch.drop_column("results_seen_at")
