"""A kept-open chat turn names its idempotency key's row (bot/chat/open_turn_rows.py), so a
killed turn's end is recorded for its key by a lookup, not a scan of `side_effects`. Turns
kept open before this get theirs from the pending keys that name them.

Revision ID: 0027_chat_open_turn_keys
Revises: 0026_task_starts
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0027_chat_open_turn_keys"
down_revision = "0026_task_starts"
branch_labels = None
depends_on = None

open_turns = sa.table("chat_open_turns", sa.column("turn_id", sa.String), sa.column("key"))
side_effects = sa.table(
    "side_effects",
    sa.column("key", sa.String),
    sa.column("kind", sa.String),
    sa.column("status", sa.String),
    sa.column("request", sa.JSON),
)


def upgrade() -> None:
    with op.batch_alter_table("chat_open_turns") as batch:
        batch.add_column(sa.Column("key", sa.String(120)))
    connection = op.get_bind()
    kept = set(connection.scalars(sa.select(open_turns.c.turn_id)))
    if not kept:
        return
    pending = connection.execute(
        sa.select(side_effects.c.key, side_effects.c.request).where(
            side_effects.c.kind == "chat_turn", side_effects.c.status == "pending"
        )
    )
    for key, request in pending:
        turn_id = (request or {}).get("turn_id")
        if turn_id in kept:
            connection.execute(
                sa.update(open_turns).where(open_turns.c.turn_id == turn_id).values(key=key)
            )


def downgrade() -> None:
    with op.batch_alter_table("chat_open_turns") as batch:
        batch.drop_column("key")
