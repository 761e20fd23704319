"""A chat turn's idempotency key claimed by sends together (instances sharing a database):
one claims it, every other reads that claim (the turn it started, what it asked), on both
backends; the claim's end, once recorded, is what any later read finds. A killed turn's end
is recorded for its key on both backends, only where none was."""

from __future__ import annotations

from typing import Any

from bot.chat.turn_keys import (
    Asked,
    KeyedTurn,
    KeyState,
    TurnEnd,
    claim_key,
    killed_end,
    read_key,
    record_end,
    record_killed_end,
    row_key,
)
from bot.db import Database
from tests.fakes.together import together

TOGETHER = 8
ASKED = Asked(message="file it", session=None, agent=None, focus=None, keep_focus=True)


def claim(db: Database, key: str, n: int) -> KeyState | None:
    turn = KeyedTurn(asked=ASKED, turn_id=f"turn{n:028d}", session_id=f"session{n}")
    found: KeyState | None = db.call(claim_key, key, turn)
    return found


def test_sends_together_claim_a_key_once_and_read_the_claim(any_db: Database) -> None:
    key = row_key(7, "client-key")
    results, failed = together(TOGETHER, lambda n: (n, claim(any_db, key, n)))

    assert failed == [], failed[:3]
    winners = [n for n, state in results if state is None]
    assert len(winners) == 1
    [winner] = winners
    losers: list[Any] = [state for _, state in results if state is not None]
    assert {state.turn.turn_id for state in losers} == {f"turn{winner:028d}"}
    assert all(state.turn.asked == ASKED and state.end is None for state in losers)

    end = TurnEnd(frames=['{"id":1,"type":"done"}'])
    any_db.call(record_end, key, f"turn{winner:028d}", end)
    state = any_db.call(read_key, key)
    assert state is not None and state.end == end


def test_a_key_is_the_operators_own(any_db: Database) -> None:
    assert row_key(1, "k") != row_key(2, "k")
    assert claim(any_db, row_key(1, "k"), 1) is None
    assert claim(any_db, row_key(2, "k"), 2) is None


def test_a_killed_turns_end_is_recorded_for_its_key_only_where_none_was(any_db: Database) -> None:
    killed, ended = row_key(7, "killed"), row_key(7, "ended")
    assert claim(any_db, killed, 1) is None
    assert claim(any_db, ended, 2) is None
    own_end = TurnEnd(frames=['{"id":1,"type":"done"}'])
    any_db.call(record_end, ended, f"turn{2:028d}", own_end)

    cut = killed_end("session1", f"turn{1:028d}", "file it", first_id=5001)
    assert any_db.call(record_killed_end, killed, f"turn{1:028d}", cut) is True
    assert any_db.call(record_killed_end, killed, f"turn{1:028d}", cut) is False  # recorded
    assert any_db.call(record_killed_end, ended, f"turn{2:028d}", cut) is False  # it ended
    assert any_db.call(record_killed_end, killed, f"turn{2:028d}", cut) is False  # not its turn
    assert any_db.call(record_killed_end, row_key(7, "never"), "turn-x", cut) is False
    state = any_db.call(read_key, killed)
    assert state is not None and state.end == cut
    assert [frame[:12] for frame in cut.frames] == ['{"id":5001,"', '{"id":5002,"']
    other = any_db.call(read_key, ended)
    assert other is not None and other.end == own_end
