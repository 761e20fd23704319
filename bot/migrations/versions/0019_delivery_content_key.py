"""Webhook deliveries' content keys (replays known), and one-time sign-in codes.

Each content key keeps its first delivery, so a replay under a new id is known
(`webhooks.content_keys`); sign-in codes replace tokens in sign-in links
(`bot.sign_in_codes`).

Revision ID: 0019_delivery_content_key
Revises: 0018_pr_final_states
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0019_delivery_content_key"
down_revision = "0018_pr_final_states"
branch_labels = None
depends_on = None


def upgrade() -> None:
    # Deliveries stored before this revision have no key: a replay of one of them is taken
    # as new once (and keyed from then on).
    op.create_table(
        "github_delivery_keys",
        sa.Column("content_key", sa.String(200), primary_key=True),
        sa.Column("delivery_id", sa.String(100), nullable=False),
    )
    op.create_table(
        "sign_in_codes",
        sa.Column("code_hash", sa.String(64), primary_key=True),
        sa.Column(
            "operator_id",
            sa.Integer,
            sa.ForeignKey("operators.id", ondelete="CASCADE"),
            nullable=False,
        ),
        sa.Column("browser_hash", sa.String(64), unique=True),
        sa.Column("expires_at", sa.DateTime, nullable=False),
    )


def downgrade() -> None:
    op.drop_table("sign_in_codes")
    op.drop_table("github_delivery_keys")
