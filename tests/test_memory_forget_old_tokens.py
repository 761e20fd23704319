"""A token stored before memory masked token shapes (memory/secrets.py) is masked by the
upgrade (migration 0028_memory_masked_tokens), and the index answers with the masked text."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import datetime
from pathlib import Path

import pytest
import sqlalchemy as sa
from alembic import command

from bot.db import Database, alembic_config, upgrade
from memory import Memory

TOKEN = "ghp_" + "Z9y8X7w6V5u4T3s2R1q0P9o8N7m6L5k4J3i2"
BEFORE_MASKING = "0027_chat_open_turn_keys"
chunks = sa.table(
    "memory_chunks",
    sa.column("id", sa.Integer),
    sa.column("key", sa.String),
    sa.column("source", sa.String),
    sa.column("repo", sa.String),
    sa.column("issue", sa.Integer),
    sa.column("paths", sa.JSON),
    sa.column("text", sa.Text),
    sa.column("created_at", sa.DateTime),
    sa.column("live", sa.Boolean),
    sa.column("replaces", sa.Integer),
)


@pytest.fixture
def database(any_db_url: str) -> Iterator[Database]:
    database = Database.from_url(any_db_url)
    upgrade(database.engine)
    command.downgrade(alembic_config(database.engine), BEFORE_MASKING)
    yield database
    database.dispose()


def _write_the_old_way(database: Database) -> None:
    """Rows as the writer stored them before masking: the token as written."""
    at = datetime(2026, 1, 5, 9, 30)
    row = {"source": "issue", "repo": "o/r", "issue": 12, "paths": ["deploy.sh"], "created_at": at}
    with database.engine.begin() as connection:
        connection.execute(
            sa.insert(chunks),
            [
                {
                    **row,
                    "key": "issue:o/r#12",
                    "text": f"#12 Deploys\n\ntoken {TOKEN}",
                    "live": False,
                },
                {
                    **row,
                    "key": "issue:o/r#12",
                    "text": f"#12 Deploys fail with 401\n\nI exported GITHUB_TOKEN={TOKEN}",
                    "live": True,
                    "replaces": 1,
                },
                {
                    **row,
                    "key": "note:1",
                    "source": "note",
                    "text": "Deploys run on Tuesdays",
                    "live": True,
                },
            ],
        )


def _texts(database: Database) -> list[tuple[int, str | None, str, bool]]:
    with database.engine.connect() as connection:
        rows = connection.execute(
            sa.select(chunks.c.id, chunks.c.key, chunks.c.text, chunks.c.live).order_by(chunks.c.id)
        )
        return [(r.id, r.key, r.text, bool(r.live)) for r in rows]


def test_a_token_stored_before_masking_is_masked_on_upgrade_and_in_the_index(
    database: Database, tmp_path: Path
) -> None:
    _write_the_old_way(database)
    memory = Memory(tmp_path / "memory", database.session)
    memory.sync()  # indexed as it was stored
    assert TOKEN in memory.search("exported GITHUB_TOKEN", repo="o/r")[0].record.text

    command.upgrade(alembic_config(database.engine), "heads")

    rows = _texts(database)
    assert not any(TOKEN in text for _id, _key, text, _live in rows)
    live = [(key, text) for _id, key, text, is_live in rows if is_live]
    assert live == [
        ("note:1", "Deploys run on Tuesdays"),
        ("issue:o/r#12", "#12 Deploys fail with 401\n\nI exported GITHUB_TOKEN=[REDACTED]"),
    ]
    memory.sync()  # any process's next sync: the old copy tombstoned, the masked one indexed
    hits = memory.search("exported GITHUB_TOKEN", repo="o/r")
    assert [h.record.text for h in hits] == [live[1][1]]
    assert hits[0].record.paths == ("deploy.sh",) and hits[0].record.issue == 12
    assert memory.stats().chunks == 2

    # Idempotent: run again, nothing changes.
    command.downgrade(alembic_config(database.engine), BEFORE_MASKING)
    command.upgrade(alembic_config(database.engine), "heads")
    assert _texts(database) == rows
