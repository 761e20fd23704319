"""Recorded terminate requests, and the database identity the memory index is bound to.

Revision ID: 0007_fault_tolerance
Revises: 0006_pending_kind
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0007_fault_tolerance"
down_revision = "0006_pending_kind"
branch_labels = None
depends_on = None


def upgrade() -> None:
    # No foreign key: recording a request must not wait on the task row a frozen worker holds.
    op.create_table(
        "task_stop_requests",
        sa.Column("task_id", sa.Integer(), primary_key=True, autoincrement=False),
        sa.Column("actor", sa.String(200), nullable=False),
        sa.Column("requested_at", sa.DateTime, nullable=False),
    )
    op.create_table(
        "memory_identity",
        sa.Column("id", sa.Integer(), primary_key=True, autoincrement=False),
        sa.Column("identity", sa.String(32), nullable=False),
        sa.Column("created_at", sa.DateTime, nullable=False),
    )


def downgrade() -> None:
    op.drop_table("memory_identity")
    op.drop_table("task_stop_requests")
