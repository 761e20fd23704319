"""Which database an index belongs to: a random id kept in the database and the manifest.

The index lives on disk under the data directory while the rows it is derived from live in
the database; pointing one at the other's partner (a PostgreSQL `serve` in a checkout whose
`./var` holds dev's SQLite index) must never answer quietly with the wrong chunks.
"""

from __future__ import annotations

import uuid
from datetime import UTC, datetime

from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from memory.models import DatabaseIdentity

ROW = 1


def database_identity(session: Session) -> str:
    """This database's id, created on first use (two processes racing agree on one)."""
    row = session.get(DatabaseIdentity, ROW)
    if row is not None:
        return row.identity
    try:
        with session.begin_nested():
            session.add(
                DatabaseIdentity(id=ROW, identity=uuid.uuid4().hex, created_at=datetime.now(UTC))
            )
    except IntegrityError:
        pass  # another process created it first: read theirs
    row = session.get(DatabaseIdentity, ROW, populate_existing=True)
    assert row is not None
    return row.identity
