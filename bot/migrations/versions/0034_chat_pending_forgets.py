"""Chat forgets that turns in flight still owe: a `forget that <words>` raises the forget
epoch, keeps its words while a turn that was open before it is still open in the
repository (that turn leaves them out as it stores), and each open turn notes the epoch it
started at (bot/chat/pending_forgets.py).

Revision ID: 0034_chat_pending_forgets
Revises: 0033_operator_revoked_at
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0034_chat_pending_forgets"
down_revision = "0033_operator_revoked_at"
branch_labels = None
depends_on = None


def upgrade() -> None:
    epoch = op.create_table(
        "chat_forget_epoch",
        sa.Column("id", sa.Integer, primary_key=True, autoincrement=False),
        sa.Column("epoch", sa.Integer, nullable=False),
    )
    op.bulk_insert(epoch, [{"id": 1, "epoch": 0}])
    op.create_table(
        "chat_pending_forgets",
        sa.Column("epoch", sa.Integer, primary_key=True, autoincrement=False),
        sa.Column("repo", sa.String(200), nullable=False),
        sa.Column("words", sa.Text, nullable=False),
    )
    with op.batch_alter_table("chat_open_turns") as batch:
        batch.add_column(sa.Column("forget_epoch", sa.Integer, nullable=False, server_default="0"))


def downgrade() -> None:
    with op.batch_alter_table("chat_open_turns") as batch:
        batch.drop_column("forget_epoch")
    op.drop_table("chat_pending_forgets")
    op.drop_table("chat_forget_epoch")
