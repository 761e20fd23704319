"""Webhook bodies compressed with lz4 on PostgreSQL.

Revision ID: 0014_body_lz4
Revises: 0013_delivery_bodies
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0014_body_lz4"
down_revision = "0013_delivery_bodies"
branch_labels = None
depends_on = None


def upgrade() -> None:
    # PostgreSQL compresses a body of more than 2 KB as it stores it, with pglz by default:
    # under a burst of deliveries that was most of the database's CPU, and intake waited on
    # it (bench/webhooks_probot.py: 0.76-0.86x Probot's rate, 1.05-1.15x with lz4). Only
    # values written from now on change; SQLite stores text as it is.
    if _lz4_available():
        op.execute("ALTER TABLE github_delivery_bodies ALTER COLUMN body SET COMPRESSION lz4")


def downgrade() -> None:
    if _lz4_available():
        op.execute("ALTER TABLE github_delivery_bodies ALTER COLUMN body SET COMPRESSION default")


def _lz4_available() -> bool:
    """PostgreSQL 14 or later built with lz4 (most packages are): then, and only then, lz4
    is one of `default_toast_compression`'s values."""
    bind = op.get_bind()
    if bind.dialect.name != "postgresql":
        return False
    methods = bind.scalar(
        sa.text("SELECT enumvals FROM pg_settings WHERE name = 'default_toast_compression'")
    )
    return bool(methods) and "lz4" in methods
