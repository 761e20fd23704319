"""Memory: token-shaped text stored before chunks were masked (memory/secrets.py) is masked
in the rows, and every live chunk that changed is re-indexed.

A live chunk whose text changes is replaced the way a new version under its key is
(`memory.chunks.add_chunk`): the old row, its text masked, stops being live, and a live row
with the masked text that `replaces` it is added, so the next `memory.sync` of any process
tombstones the old copy in the index and indexes the masked one (the index's old copy goes
with the next merge of its segment, as a replaced chunk's does). Rows that are not live are
masked in place. Running it again changes nothing: masked text has nothing left to mask.

Revision ID: 0028_memory_masked_tokens
Revises: 0027_chat_open_turn_keys
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

from memory.secrets import masked

revision = "0028_memory_masked_tokens"
down_revision = "0027_chat_open_turn_keys"
branch_labels = None
depends_on = None

BATCH = 500
MAX_TEXT_CHARS = 50_000  # memory.chunks.MAX_TEXT_CHARS when this was written
# Text that may hold a token shape (memory.secrets.TOKEN_SHAPES), lower-cased: only these
# rows are read into Python; the regular expression decides.
_MAY_HOLD = (
    "%gh_\\_%",
    "%github\\_pat\\_%",
    "%sk-%",
    "%akia%",
    "%xox%",
    "%authorization:%",
    "%bearer %",
)

chunks = sa.table(
    "memory_chunks",
    sa.column("id", sa.Integer),
    sa.column("key", sa.String),
    sa.column("source", sa.String),
    sa.column("repo", sa.String),
    sa.column("issue", sa.Integer),
    sa.column("session_id", sa.String),
    sa.column("paths", sa.JSON),
    sa.column("text", sa.Text),
    sa.column("created_at", sa.DateTime),
    sa.column("live", sa.Boolean),
    sa.column("replaces", sa.Integer),
)


def upgrade() -> None:
    bind = op.get_bind()
    last = bind.execute(sa.select(sa.func.max(chunks.c.id))).scalar() or 0
    lowered = sa.func.lower(chunks.c.text)
    may_hold = sa.or_(*(lowered.like(pattern, escape="\\") for pattern in _MAY_HOLD))
    after = 0
    while True:
        rows = bind.execute(
            sa.select(chunks)
            .where(chunks.c.id > after, chunks.c.id <= last, may_hold)
            .order_by(chunks.c.id)
            .limit(BATCH)
        ).all()
        if not rows:
            return
        for row in rows:
            _mask(bind, row)
        after = rows[-1].id


def _mask(bind: sa.Connection, row: sa.Row[tuple[object, ...]]) -> None:
    text = masked(row.text)[:MAX_TEXT_CHARS]
    if text == row.text:
        return
    bind.execute(
        sa.update(chunks).where(chunks.c.id == row.id).values(text=text, live=sa.false())
    )
    if row.live:  # a new version the index meets above its watermark
        bind.execute(
            sa.insert(chunks).values(
                key=row.key,
                source=row.source,
                repo=row.repo,
                issue=row.issue,
                session_id=row.session_id,
                paths=row.paths,
                text=text,
                created_at=row.created_at,
                live=True,
                replaces=row.id,
            )
        )


def downgrade() -> None:
    pass  # the tokens are gone: nothing to put back
