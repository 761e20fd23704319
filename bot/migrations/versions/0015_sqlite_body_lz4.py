"""Webhook bodies compressed with lz4 on SQLite, by Steelframe (`webhooks.stored_bodies`).

Revision ID: 0015_sqlite_body_lz4
Revises: 0014_body_lz4
"""

from __future__ import annotations

import lz4.block
import sqlalchemy as sa
from alembic import op

revision = "0015_sqlite_body_lz4"
down_revision = "0014_body_lz4"
branch_labels = None
depends_on = None

# Bodies rewritten per statement on the way down (about 1 MB of text each time).
DOWNGRADE_BATCH = 128


def upgrade() -> None:
    # Nothing to change: from this revision on, SQLite bodies are written compressed (a
    # BLOB) and read either way, so the bodies stored as text before stay as they are.
    pass


def downgrade() -> None:
    # The revisions before this one read a body as text: each compressed one is written back
    # as the text it holds.
    bind = op.get_bind()
    if bind.dialect.name != "sqlite":
        return
    compressed = sa.text(
        "SELECT delivery_id, body FROM github_delivery_bodies WHERE typeof(body) = 'blob' "
        "LIMIT :limit"
    )
    as_text = sa.text("UPDATE github_delivery_bodies SET body = :body WHERE delivery_id = :id")
    while rows := bind.execute(compressed, {"limit": DOWNGRADE_BATCH}).all():
        bind.execute(
            as_text,
            [{"id": id_, "body": lz4.block.decompress(body).decode("utf-8")} for id_, body in rows],
        )
