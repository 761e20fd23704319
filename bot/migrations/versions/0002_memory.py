"""Memory: chunks of session memory with provenance (the index is derived from them).

Revision ID: 0002_memory
Revises: 0001_foundation
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0002_memory"
down_revision = "0001_foundation"
branch_labels = None
depends_on = None

ChunkId = sa.BigInteger().with_variant(sa.Integer(), "sqlite")


def upgrade() -> None:
    op.create_table(
        "memory_chunks",
        sa.Column("id", ChunkId, primary_key=True, autoincrement=True),
        sa.Column("key", sa.String(300)),
        sa.Column("source", sa.String(40), nullable=False),
        sa.Column("repo", sa.String(200), nullable=False),
        sa.Column("issue", sa.Integer),
        sa.Column("session_id", sa.String(64)),
        sa.Column("paths", sa.JSON, nullable=False),
        sa.Column("text", sa.Text, nullable=False),
        sa.Column("created_at", sa.DateTime, nullable=False),
        sa.Column("live", sa.Boolean, nullable=False),
        sa.Column("replaces", ChunkId),
        sqlite_autoincrement=True,
    )
    op.create_index("ix_memory_chunks_recent", "memory_chunks", ["repo", "source", "id"])
    op.create_index(
        "uq_memory_chunks_live_key",
        "memory_chunks",
        ["key"],
        unique=True,
        sqlite_where=sa.text("live"),
        postgresql_where=sa.text("live"),
    )


def downgrade() -> None:
    op.drop_index("uq_memory_chunks_live_key", table_name="memory_chunks")
    op.drop_index("ix_memory_chunks_recent", table_name="memory_chunks")
    op.drop_table("memory_chunks")
