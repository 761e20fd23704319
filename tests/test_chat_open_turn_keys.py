"""A chat turn kept open names its idempotency key (bot/chat/open_turn_rows.py), so the end
of a turn whose process was killed is recorded for that key by a lookup, on both backends:
a send again with the key answers it. Turns kept open before the key column existed get
theirs from the pending keys that name them (migration 0027). Before, the key's row was
found by scanning `side_effects` for the turn id inside each pending key's JSON."""

from __future__ import annotations

from alembic import command
from sqlalchemy import column, select, table
from sqlalchemy.orm import Session

from bot.chat.left_turns import note_killed_turn
from bot.chat.open_turn_rows import OpenTurn
from bot.chat.session_rows import new_session_row
from bot.chat.turn_keys import Asked, KeyedTurn, claim_key, killed_end, read_key, row_key
from bot.clock import utcnow
from bot.db import Database, alembic_config
from bot.models import Agent
from bot.operators import create_operator

ASKED = Asked(message="file it", session=None, agent=None, focus=None, keep_focus=True)
KEYED, UNKEYED = "keyed000000000000000000000000000", "plain000000000000000000000000000"


def _chat(session: Session, operator_name: str) -> tuple[int, str]:
    """An operator and a chat session of theirs."""
    session.add(Agent(name="default", repo="o/r", checkout="/c", runtime="x", updated_at=utcnow()))
    operator, _ = create_operator(session, operator_name)
    row = new_session_row(operator.id, agent="default")
    session.add(row)
    session.flush()
    return operator.id, row.id


def _kept_open(session: Session, keys: dict[str, str | None]) -> tuple[int, str]:
    """An operator, a session, and a turn kept open in it for each of `keys` (turn -> its
    key's row key), each key claimed by its turn."""
    operator, chat = _chat(session, "killed")
    for turn_id, key in keys.items():
        if key is not None:
            assert claim_key(session, key, KeyedTurn(ASKED, turn_id, chat)) is None
        opened = OpenTurn(
            turn_id=turn_id,
            operator_id=operator,
            session_id=chat,
            message="file it",
            started_at=utcnow(),
            key=key,
        )
        session.add(opened)
    return operator, chat


def test_a_killed_turns_end_is_recorded_for_the_key_its_open_row_names(any_db: Database) -> None:
    key = row_key(7, "client-key")
    operator, session = any_db.call(_kept_open, {KEYED: key, UNKEYED: None})

    for turn_id in (KEYED, UNKEYED):
        noted = any_db.call(note_killed_turn, operator, session, turn_id, "file it", first_id=5001)
        assert noted is True
    state = any_db.call(read_key, key)
    assert state is not None and state.turn.turn_id == KEYED
    assert state.end == killed_end(session, KEYED, "file it", first_id=5001)
    # Noted once: a second note writes nothing and leaves the key's end as it is.
    assert any_db.call(note_killed_turn, operator, session, KEYED, "again", first_id=9) is False
    assert any_db.call(read_key, key) == state


def test_the_migration_gives_turns_kept_open_before_it_their_keys(any_db_url: str) -> None:
    db = Database.from_url(any_db_url)
    try:
        config = alembic_config(db.engine)
        command.upgrade(config, "0025_chat_open_turns")
        key = row_key(7, "client-key")
        db.call(_kept_open_before, key)
        command.upgrade(config, "heads")
        kept = db.call(lambda s: dict(s.execute(select(OpenTurn.turn_id, OpenTurn.key)).all()))
        assert kept == {KEYED: key, UNKEYED: None}
    finally:
        db.dispose()


# chat_open_turns as the version before the key column wrote it.
OPEN_TURNS_BEFORE = table(
    "chat_open_turns",
    *(column(name) for name in ("turn_id", "operator_id", "session_id", "message", "started_at")),
)
# operators as that version wrote them (the model has columns added since).
OPERATORS_BEFORE = table(
    "operators", *(column(name) for name in ("id", "name", "token_hash", "created_at"))
)
OPERATOR_BEFORE = {"name": "before", "token_hash": "0" * 64}
# chat_sessions as that version wrote it (the model has columns added since).
SESSION_COLUMNS_BEFORE = (
    "id",
    "operator_id",
    "agent",
    "kind",
    "created_at",
    "last_activity_at",
    "summary_status",
)
SESSIONS_BEFORE = table("chat_sessions", *(column(name) for name in SESSION_COLUMNS_BEFORE))


def _kept_open_before(session: Session, key: str) -> None:
    """Two turns kept open by a version without the key column: one sent with `key`."""
    session.add(Agent(name="default", repo="o/r", checkout="/c", runtime="x", updated_at=utcnow()))
    owner = session.execute(
        OPERATORS_BEFORE.insert()
        .values(**OPERATOR_BEFORE, created_at=utcnow())
        .returning(OPERATORS_BEFORE.c.id)
    ).scalar_one()
    row = new_session_row(owner, agent="default")
    session.execute(
        SESSIONS_BEFORE.insert().values(
            {name: getattr(row, name) for name in SESSION_COLUMNS_BEFORE}
        )
    )
    operator, chat = owner, row.id
    assert claim_key(session, key, KeyedTurn(ASKED, KEYED, chat)) is None
    for turn_id in (KEYED, UNKEYED):
        values = {"turn_id": turn_id, "operator_id": operator, "session_id": chat}
        session.execute(
            OPEN_TURNS_BEFORE.insert().values(**values, message="file it", started_at=utcnow())
        )
