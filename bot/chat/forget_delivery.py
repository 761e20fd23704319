"""A `forget that <words>` delivered beyond this process: told to every instance (logged and
published, bot.chat.coordination) and taken out of the frames Redis relays
(bot.chat.forgotten_frames), the sessions it changed announced. With Redis away it is owed:
sent again, in order, once Redis answers (tries backing off, the outage logged once), never
holding up the chat turn that ran it.

An owed forget is kept while Redis stays away: the frames other instances keep for Redis meanwhile
hold the words until it is back, and are written only after their instance has read the
forgets logged (bot.chat.frame_outbox), so it must reach the log once Redis answers, however
long the outage. Once Redis answers it is sent within a try or two; a forget whose sending
keeps failing otherwise (the database) is dropped after the frames' lifetime (`keep_for`,
the relay's linger): the frames it was for are gone by then. At most `max_owed` are kept
(the oldest go first, logged).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field

from redis.exceptions import RedisError

from bot.chat.announce import announce
from bot.chat.coordination import ForgetSignal, TurnLocks
from bot.chat.forget_words import Words
from bot.chat.forgotten import owners_in_repo
from bot.chat.forgotten_frames import FrameForgets
from bot.db import Database
from bot.events import OperatorEvents, SessionChange

log = logging.getLogger(__name__)
DEFAULT_MAX_OWED = 1_000  # forgets kept for a Redis that is away, at most
# An owed forget is tried again after this pause, doubling up to the next: a forget reaches
# the other instances within seconds of Redis's return.
RETRY_MIN = 0.5
RETRY_MAX = 5.0
Changed = set[tuple[int, str]]  # (operator, session) pairs whose relayed frames changed


@dataclass
class _Owed:
    signal: ForgetSignal
    give_up_at: float  # monotonic; pushed on while Redis is away


@dataclass
class ForgetDelivery:
    """Sends forgets to the other instances and the relayed frames, now or once Redis is
    back."""

    db: Database
    frame_forgets: FrameForgets
    locks: TurnLocks
    events: OperatorEvents | None
    keep_for: float
    max_owed: int = DEFAULT_MAX_OWED
    clock: Callable[[], float] = time.monotonic
    _owed: deque[_Owed] = field(default_factory=deque, init=False)
    _retrying: asyncio.Task[None] | None = field(default=None, init=False)

    async def send(self, signal: ForgetSignal) -> Changed:
        """Deliver the forget: the sessions whose relayed frames changed, for the caller to
        announce with its own. Not delivered now (Redis away, or forgets owed before it,
        which go first): owed, nothing changed yet (announced once sent)."""
        if not self._owed:
            changed = await self._deliver(signal)
            if changed is not None:
                return changed
        self._owe(signal)
        return set()

    @property
    def owed(self) -> int:
        """Forgets waiting for Redis."""
        return len(self._owed)

    async def _deliver(self, signal: ForgetSignal) -> Changed | None:
        """Logged and published first, the relayed frames after: frames another instance
        writes between the two are rewritten here, those it writes after were rewritten by
        it, having read the log (bot.chat.frame_outbox). None: Redis away."""
        if not await self.locks.signal_forget(signal):
            return None
        try:
            relayed = await self.frame_forgets.relayed_sessions()
            if not relayed:
                return set()
            owners = await self.db.run(owners_in_repo, signal.repo, relayed)
            framed = await self.frame_forgets.forget_relayed(Words(signal.words), set(owners))
        except RedisError as exc:
            log.warning("forget: the relayed frames were not read (%s)", type(exc).__name__)
            return None
        return {(owners[session_id], session_id) for session_id in framed}

    def _owe(self, signal: ForgetSignal) -> None:
        if not self._owed:
            log.warning(
                "Redis unreachable: a forget is sent to the other instances and the relayed "
                "frames once it is back"
            )
        self._owed.append(_Owed(signal, self.clock() + self.keep_for))
        while len(self._owed) > self.max_owed:
            self._owed.popleft()
            log.warning("more than %d forgets wait for Redis: the oldest is dropped", self.max_owed)
        if self._retrying is None or self._retrying.done():
            self._retrying = asyncio.create_task(self._retry(), name="chat-forgets-owed")

    async def _retry(self) -> None:
        pause = RETRY_MIN
        while self._owed:
            await asyncio.sleep(pause)
            pause = RETRY_MIN if await self._send_owed() else min(pause * 2, RETRY_MAX)
        log.warning("Redis reachable again: the forgets owed to it were sent")

    async def _send_owed(self) -> bool:
        """The owed forgets sent, oldest first, while they go; whether any went."""
        went = False
        while self._owed:
            owed = self._owed[0]
            try:
                changed = await self._deliver(owed.signal)
            except Exception as exc:  # the database: tried again until its frames are gone
                if self.clock() < owed.give_up_at:
                    return went
                log.warning("a forget owed to the other instances was dropped (%r)", exc)
                self._owed.popleft()
                continue
            if changed is None:  # Redis still away: its frames wait for it too
                owed.give_up_at = self.clock() + self.keep_for
                return went
            self._owed.popleft()
            went = True
            for operator_id, session_id in sorted(changed):
                await announce(self.events, operator_id, session_id, SessionChange.FORGOTTEN)
        return went

    async def close(self) -> None:
        """Stop trying (the owed forgets go with the process: so do its frames)."""
        if self._retrying is not None:
            self._retrying.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._retrying
