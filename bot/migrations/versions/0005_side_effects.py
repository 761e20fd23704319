"""Side effects done once per key: filings and Decision publishes.

Revision ID: 0005_side_effects
Revises: 0004_lifecycle
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0005_side_effects"
down_revision = "0004_lifecycle"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "side_effects",
        sa.Column("id", sa.Integer, primary_key=True),
        sa.Column("key", sa.String(120), nullable=False),
        sa.Column("kind", sa.String(40), nullable=False),
        sa.Column("status", sa.String(20), nullable=False),
        sa.Column("request", sa.JSON, nullable=False),
        sa.Column("result", sa.JSON),
        sa.Column("lease_until", sa.DateTime),
        sa.Column("created_at", sa.DateTime, nullable=False),
        sa.Column("updated_at", sa.DateTime, nullable=False),
        sa.UniqueConstraint("key", name="uq_side_effects_key"),
    )


def downgrade() -> None:
    op.drop_table("side_effects")
