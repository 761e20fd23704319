"""How chat turns end in their records: a turn's end recorded for its idempotency key as its
terminal frame goes out, and a turn that did not complete (cut by a shutdown, its instance
killed, left open by a killed process) noted once in its session, which its operator's
clients are told changed."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Collection

from sqlalchemy.orm import Session

from bot.chat.announce import announce
from bot.chat.coordination import TurnLocks
from bot.chat.cut_notes import store_cut_note
from bot.chat.forget_words import Words
from bot.chat.forgotten_frames import FrameForgets
from bot.chat.forgotten_keys import end_without
from bot.chat.frames import NumberedFrame, OrphanedTurn
from bot.chat.inflight import TurnHandle, TurnRegistry
from bot.chat.left_turns import LeftTurn, note_killed, note_left_turns, turns_left
from bot.chat.pending_forgets import end_open, owed, settle
from bot.chat.session_store import TurnSession
from bot.chat.turn import CUT_REPLY
from bot.chat.turn_keys import TurnEnd, record_end
from bot.chat.turn_request import TurnRequest
from bot.clock import Clock
from bot.contracts.chat import DoneFrame
from bot.db import Database
from bot.events import OperatorEvents, SessionChange
from bot.group_commit import GroupCommit

log = logging.getLogger(__name__)
# Each instance looks for turns left open by a killed process this often: a turn is noted
# at the second look that finds it left (its slot lapses within SLOT_TTL_SECONDS of the
# kill), so within three of these, and the forgets' words it owed go with it.
LEFT_TURN_SWEEP_SECONDS = 60.0


def _turn_ended(
    session: Session,
    handle: TurnHandle,
    key: str | None,
    end: TurnEnd | None,
    *,
    failed: bool,
    clock: Clock,
) -> list[str]:
    """The end recorded for the key; a turn that stored nothing let go, and the words of
    the forgets it owed (raised while it ran, bot.chat.pending_forgets) returned: read
    before its kept-open row goes, for its frames to leave out."""
    owes = owed(session, handle.turn_id, handle.session_id) if failed else []
    if key is not None and end is not None:
        for words in owes:
            end = end_without(end, Words(words))
        record_end(session, key, handle.turn_id, end, clock=clock)
    if failed:
        end_open(session, handle.turn_id)
    return owes


def _cut_noted(
    session: Session,
    operator_id: int,
    session_id: str,
    handle: TurnHandle,
    message: str,
    *,
    clock: Clock,
) -> tuple[bool, list[str]]:
    """The cut turn's note (`store_cut_note`: whether it was written), and the words of the
    forgets it owed, read before the note lets its kept-open row go."""
    owes = owed(session, handle.turn_id, session_id)
    stored = store_cut_note(
        session, operator_id, session_id, handle.turn_id, message, reply=CUT_REPLY, clock=clock
    )
    return stored, owes


def _killed_noted(session: Session, turn: OrphanedTurn, *, clock: Clock) -> tuple[bool, list[str]]:
    """The killed turn's note (`note_killed_turn`: whether it was written), and the words
    of the forgets it owed, read before the note lets its kept-open row go."""
    owes = owed(session, turn.turn_id, turn.session_id)
    return note_killed(session, turn, clock=clock), owes


class TurnEnds:
    """Records turns' ends through the turns' group commit (`writes`)."""

    def __init__(
        self,
        *,
        db: Database,
        writes: GroupCommit,
        registry: TurnRegistry,
        locks: TurnLocks,
        events: OperatorEvents | None,
        frame_forgets: FrameForgets,
        clock: Clock,
    ) -> None:
        self.db = db
        self.frame_forgets = frame_forgets
        self.writes = writes
        self.registry = registry
        self.locks = locks
        self.events = events
        self.clock = clock

    async def record_end(
        self,
        key: str | None,
        handle: TurnHandle,
        terminal: NumberedFrame,
        *,
        forgotten: tuple[Words, ...] = (),
    ) -> None:
        """As the turn's terminal frame goes out: its end recorded for its key (without the
        words `forgotten`, bot.chat.forgotten_keys), and a turn that stored nothing
        (stopped, failed) no longer kept open (a done turn let it go as it stored its
        messages); such a turn's frames, here and relayed, leave out the words of the
        forgets raised while it ran, as a done turn's do (its pieces streamed after the
        forget may say them)."""
        # A cut turn's note let it go already (bot.chat.cut_notes, through persist_turn).
        failed = not isinstance(terminal.frame, DoneFrame) and not handle.cut
        if key is None and not failed:
            return
        first = [handle.frames[0].data.decode()] if handle.frames else []
        end = TurnEnd(frames=[*first, terminal.data.decode()]) if key is not None else None
        if end is not None:
            for words in forgotten:
                end = end_without(end, words)
        owes = await self.writes.run(_turn_ended, handle, key, end, failed=failed, clock=self.clock)
        if owes:
            await self.frame_forgets.in_turn(handle, [Words(words) for words in owes])

    async def note_left_turns(self) -> int:
        """At start-up: turns a killed process left acknowledged but unstored, noted in
        their sessions (bot.chat.left_turns). How many were noted."""
        left = await turns_left(self.db, registry=self.registry, locks=self.locks)
        return await self._note(left)

    async def _note(self, left: list[LeftTurn]) -> int:
        noted = await note_left_turns(self.writes, left, clock=self.clock)
        for turn in noted:
            await announce(self.events, turn.operator_id, turn.session_id, SessionChange.UPDATED)
        return len(noted)

    async def sweep_left_turns(self, suspects: Collection[str]) -> set[str]:
        """One look (any instance's, now and then: `run_left_turn_sweeps`) at the turns kept
        open: one left by a killed process at the last look too (`suspects`) is noted as at
        start-up; and the words no open turn owes any more are let go
        (bot.chat.pending_forgets). The turns left now, for the next look. Twice, not once:
        the look does not take a turn ending as it looks for one left. With Redis away, a
        slot reads as free: nothing is noted."""
        left = await turns_left(self.db, registry=self.registry, locks=self.locks)
        if self.locks.degraded:
            return set()
        await self._note([turn for turn in left if turn.turn_id in suspects])
        await self.writes.run(settle)
        return {turn.turn_id for turn in left} - set(suspects)

    async def run_left_turn_sweeps(self, every: float = LEFT_TURN_SWEEP_SECONDS) -> None:
        """Until cancelled: `sweep_left_turns` every `every` seconds (a failure is logged;
        the next look tries again)."""
        suspects: set[str] = set()
        while True:
            await asyncio.sleep(every)
            try:
                suspects = await self.sweep_left_turns(suspects)
            except Exception as exc:  # the database away: looked at again next time
                log.warning("the look for chat turns left open failed (%r)", exc)

    async def record_cut(
        self, handle: TurnHandle, *, request: TurnRequest, ts: TurnSession
    ) -> None:
        """The turn was cut (the service is stopping): its session keeps the message and
        says the turn did not complete (bot.chat.turn.cut_record), once; its frames, here
        and relayed (read again through other instances), leave out the words of the
        forgets raised while it ran, as the note does."""
        stored, owes = await self.writes.run(
            _cut_noted, request.operator_id, ts.id, handle, request.message, clock=self.clock
        )
        if owes:
            await self.frame_forgets.in_turn(handle, [Words(words) for words in owes])
        if stored:
            await announce(self.events, request.operator_id, ts.id, SessionChange.UPDATED)

    async def record_owner_gone(self, turn: OrphanedTurn) -> None:
        """A reader ended a turn whose instance went away (bot.chat.frames): its session
        keeps the message and says the turn did not complete, once, and its key (if it was
        sent with one) records that end (a turn whose answer or cut was stored before its
        instance died is left as it is)."""
        stored, owes = await self.writes.run(_killed_noted, turn, clock=self.clock)
        if owes:  # its pieces relayed after a forget, before the kill, may say the words
            await self.frame_forgets.in_ended_turn(turn.turn_id, [Words(w) for w in owes])
        if stored:
            await announce(self.events, turn.operator_id, turn.session_id, SessionChange.UPDATED)
