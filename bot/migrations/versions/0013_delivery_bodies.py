"""Webhook bodies in a table of their own, written once.

Revision ID: 0013_delivery_bodies
Revises: 0012_handler_done
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0013_delivery_bodies"
down_revision = "0012_handler_done"
branch_labels = None
depends_on = None


def upgrade() -> None:
    # A delivery's status changes two or three times; SQLite rewrites the whole row (its
    # ~8 KB body included) each time. Apart, the body is written once.
    op.create_table(
        "github_delivery_bodies",
        sa.Column("delivery_id", sa.String(100), primary_key=True),
        sa.Column("body", sa.Text, nullable=False),
    )
    op.execute(
        "INSERT INTO github_delivery_bodies (delivery_id, body) "
        "SELECT delivery_id, body FROM github_deliveries"
    )
    with op.batch_alter_table("github_deliveries") as batch:
        batch.drop_column("body")


def downgrade() -> None:
    with op.batch_alter_table("github_deliveries") as batch:
        batch.add_column(sa.Column("body", sa.Text, nullable=False, server_default=""))
    op.execute(
        "UPDATE github_deliveries SET body = (SELECT body FROM github_delivery_bodies b "
        "WHERE b.delivery_id = github_deliveries.delivery_id)"
    )
    op.drop_table("github_delivery_bodies")
