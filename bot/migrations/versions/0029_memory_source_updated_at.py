"""Memory: when a chunk's source last changed its text (GitHub's `updated_at`), so an older
edit delivered after a newer one never replaces it (memory.chunks.add_chunk).

Revision ID: 0029_memory_source_updated_at
Revises: 0028_memory_masked_tokens
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0029_memory_source_updated_at"
down_revision = "0028_memory_masked_tokens"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("memory_chunks") as batch:
        batch.add_column(sa.Column("source_updated_at", sa.DateTime, nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("memory_chunks") as batch:
        batch.drop_column("source_updated_at")
