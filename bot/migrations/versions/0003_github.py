"""GitHub App: webhook deliveries, installations, repositories.

Revision ID: 0003_github
Revises: 0002_memory
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0003_github"
down_revision = "0002_memory"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "github_deliveries",
        sa.Column("delivery_id", sa.String(100), primary_key=True),
        sa.Column("event", sa.String(64), nullable=False),
        sa.Column("action", sa.String(64)),
        sa.Column("installation_id", sa.BigInteger),
        sa.Column("repo", sa.String(200)),
        sa.Column("body", sa.Text, nullable=False),
        sa.Column("status", sa.String(20), nullable=False),
        sa.Column("reason", sa.Text),
        sa.Column("received_at", sa.DateTime, nullable=False),
        sa.Column("claimed_at", sa.DateTime),
        sa.Column("processed_at", sa.DateTime),
        sa.Column("attempts", sa.Integer, nullable=False, server_default="0"),
    )
    op.create_index(
        "ix_github_deliveries_status_received", "github_deliveries", ["status", "received_at"]
    )
    op.create_table(
        "github_installations",
        sa.Column("id", sa.BigInteger, primary_key=True, autoincrement=False),
        sa.Column("account_login", sa.String(100)),
        sa.Column("account_type", sa.String(40)),
        sa.Column("suspended_at", sa.DateTime),
        sa.Column("removed_at", sa.DateTime),
        sa.Column("created_at", sa.DateTime, nullable=False),
        sa.Column("updated_at", sa.DateTime, nullable=False),
    )
    op.create_table(
        "github_repositories",
        sa.Column("id", sa.BigInteger, primary_key=True, autoincrement=False),
        sa.Column("full_name", sa.String(200), nullable=False, unique=True),
        sa.Column("installation_id", sa.BigInteger),
        sa.Column("private", sa.Boolean, nullable=False, server_default=sa.false()),
        sa.Column("removed_at", sa.DateTime),
        sa.Column("updated_at", sa.DateTime, nullable=False),
    )
    op.create_index(
        "ix_github_repositories_installation_id", "github_repositories", ["installation_id"]
    )


def downgrade() -> None:
    op.drop_index("ix_github_repositories_installation_id", "github_repositories")
    op.drop_table("github_repositories")
    op.drop_table("github_installations")
    op.drop_index("ix_github_deliveries_status_received", "github_deliveries")
    op.drop_table("github_deliveries")
