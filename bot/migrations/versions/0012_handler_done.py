"""A webhook handler's effect and its "done" record commit together (exactly once).

Revision ID: 0012_handler_done
Revises: 0011_sandbox
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0012_handler_done"
down_revision = "0011_sandbox"
branch_labels = None
depends_on = None


def upgrade() -> None:
    # Written in the transaction of the handler's effect (bot.handler_runs): a restarted
    # process skips a handler recorded here instead of running it a second time.
    op.create_table(
        "github_delivery_handlers",
        sa.Column("delivery_id", sa.String(100), primary_key=True),
        sa.Column("handler", sa.String(200), primary_key=True),
        sa.Column("done_at", sa.DateTime, nullable=False),
    )


def downgrade() -> None:
    op.drop_table("github_delivery_handlers")
