"""In-flight turns: detached from HTTP connections, replayable, stoppable.

A turn runs as its own asyncio task and appends frames to a buffer. Any number of
subscribers read the buffer from an event id onwards (SSE `Last-Event-ID`), so a client that
disconnects only unsubscribes and can re-attach later without losing or doubling a frame.
Finished turns linger briefly so a late re-attach still gets the closing `done`/`error`.

One operator has at most one turn in flight: a second send while one runs is a Conflict
(409) naming the running turn's session, which the client can resume.

When the service stops, the turns operators are watching get a grace period to finish
(`TurnRegistry.shut_down`); then every turn still running is cut: it records in its session
that it did not complete (`TurnHandle.on_cut`) and ends with an `error` frame whose reason
is `cancelled` (the service stopped it, not its operator), relayed before the relay closes,
so a client re-attaching anywhere, before or after a restart, reads the turn's end. Both
steps are bounded: a database or Redis that does not answer costs a logged line, not a hung
shutdown.

Frame ids grow across the turns of a session (the turn's start in milliseconds times 1,000,
plus the frame's place), so a client's `Last-Event-ID` never names a frame of another turn.
With Redis, frames are also relayed (bot/chat/frames.py) for resume on other instances.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections import deque
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from enum import StrEnum

from bot.chat.coordination import SET_UP_WAIT_SECONDS
from bot.chat.frames import FrameRelay, NumberedFrame
from bot.contracts.chat import ErrorFrame, ErrorReason, Frame
from bot.contracts.errors import ErrorDetail
from bot.errors import Conflict, Unavailable

log = logging.getLogger(__name__)
DEFAULT_LINGER_SECONDS = 120.0
# What the operator is told of a turn the service cut (a restart, a deploy, a shutdown).
# The clients show it after their own words for a failed turn ("The turn failed
# (cancelled): ... Try again." in the GUI, "Turn failed: ..." in the TUI).
SERVICE_STOPPED_TEXT = "the service stopped (a restart or shutdown) before this turn finished"
# A cut turn records that it did not complete within this (a database that does not answer
# costs the record, logged, never the turn's end).
CUT_RECORD_SECONDS = 3.0
# A cut turn's end recorded for its idempotency key within this (after its note, before its
# frame's relay: all three within CUT_SECONDS).
CUT_END_RECORD_SECONDS = 1.5
# Cut turns end within this: the record, then the terminal frame's relay, whose write gives
# up after bot.chat.frame_outbox.WRITE_TIMEOUT (5 s) on a Redis that does not answer.
CUT_SECONDS = 10.0


@dataclass
class TurnHandle:
    turn_id: str
    operator_id: int
    session_id: str
    frames: list[NumberedFrame] = field(default_factory=list)
    finished_at: float | None = None
    task: asyncio.Task[None] | None = None
    stop_requested: bool = False
    # Set once the model has answered: from then on the turn applies its intent and
    # persists, and a stop no longer cancels it (a half-done side effect would be lost).
    committing: bool = False
    # Runs just before the terminal frame is sent, so a client that reacts to `done` at
    # once finds the turn slot already free (the Redis lock released).
    before_terminal: Callable[[TurnHandle], Awaitable[None]] | None = None
    # Runs when the service cuts the turn (shutting down), before its terminal frame: records
    # in its session that it did not complete. Set once the session exists; not run once
    # the turn is committing (its own answer may be stored already).
    on_cut: Callable[[TurnHandle], Awaitable[None]] | None = None
    # Runs as the terminal frame goes out, before the turn slot is released: records the
    # turn's end for the idempotency key it was sent with (bot.chat.turn_keys), so a send
    # again with that key, even one reacting to this frame at once, finds it recorded.
    record_end: Callable[[TurnHandle, NumberedFrame], Awaitable[None]] | None = None
    first_id: int = 1  # the id of this turn's first frame (frame_base)
    relay: FrameRelay | None = None
    # Set once the turn's session is written (after its first frame), or will never be.
    opened: asyncio.Event = field(default_factory=asyncio.Event)
    # Set once its set-up is over: launched (its session known) or released (refused).
    set_up: asyncio.Event = field(default_factory=asyncio.Event)
    cut: bool = False  # the service ended it, shutting down (TurnRegistry._cut)
    # Subscribers reading the turn in this process (a client watching it): shutdown lets
    # a watched turn finish, within its grace.
    watchers: int = 0
    # One future per waiting subscriber, resolved by the next frame.
    _waiters: list[asyncio.Future[bool]] = field(default_factory=list)

    @property
    def finished(self) -> bool:
        return self.finished_at is not None

    async def emit(self, frame: Frame) -> None:
        if self.finished:
            return
        numbered = NumberedFrame.of(self.first_id + len(self.frames), frame)
        if numbered.terminal and self.record_end is not None:
            await _record_end(self, numbered)
        if numbered.terminal and self.before_terminal is not None:
            release, self.before_terminal = self.before_terminal, None
            try:
                await release(self)
            except Exception:
                log.warning("releasing turn %s failed", self.turn_id, exc_info=True)
        self.frames.append(numbered)
        if numbered.terminal:
            self.finished_at = time.monotonic()
        waiters, self._waiters = self._waiters, []
        for waiter in waiters:
            if not waiter.done():
                waiter.set_result(True)
        if self.relay is not None:
            await self.relay.publish(self.operator_id, self.turn_id, self.session_id, numbered)
        # Let subscribers write this frame now: a runtime that produces many events without
        # awaiting I/O would otherwise hold the loop and the client would see nothing.
        await asyncio.sleep(0)

    async def subscribe(
        self, *, after: int = 0, heartbeat: float | None = None
    ) -> AsyncIterator[NumberedFrame | None]:
        """Frames with id > `after`, then live ones until the terminal frame.

        Yields None when `heartbeat` seconds pass with nothing new (the SSE writer sends a
        comment line so proxies keep the connection open).
        """
        position = min(max(0, after - self.first_id + 1), len(self.frames))
        self.watchers += 1
        try:
            while True:
                while position < len(self.frames):
                    frame = self.frames[position]
                    position += 1
                    yield frame
                    if frame.terminal:
                        return
                if self.finished:
                    return
                if not await self._next_frame(heartbeat):
                    yield None
        finally:
            self.watchers -= 1

    async def _next_frame(self, heartbeat: float | None) -> bool:
        """Wait for the next frame: True when it came, False after `heartbeat` seconds.

        A future and a timer, not `wait_for` on an Event: on Python 3.11 `wait_for` makes a
        task for every wait, and this runs once per frame per subscriber (bench/README.md,
        1,000 chat streams)."""
        loop = asyncio.get_running_loop()
        waiter: asyncio.Future[bool] = loop.create_future()
        self._waiters.append(waiter)
        timer = None if heartbeat is None else loop.call_later(heartbeat, _lapse, waiter)
        try:
            return await waiter
        finally:
            if timer is not None:
                timer.cancel()
            if waiter in self._waiters:  # it lapsed, or its subscriber left
                self._waiters.remove(waiter)


async def _record_cut(handle: TurnHandle) -> None:
    """Let the cut turn's session say the turn did not complete (bounded, logged)."""
    record, handle.on_cut = handle.on_cut, None
    if record is None or handle.committing:
        return
    try:
        async with asyncio.timeout(CUT_RECORD_SECONDS):
            await record(handle)
    except Exception as exc:  # TimeoutError included: the frame still goes out
        log.warning("turn %s: its cut was not recorded in its session (%r)", handle.turn_id, exc)


async def _record_end(handle: TurnHandle, terminal: NumberedFrame) -> None:
    """Record the turn's end for its key (bounded, logged: a database that does not answer
    costs the record, never the turn's end)."""
    record, handle.record_end = handle.record_end, None
    if record is None:
        return
    try:
        async with asyncio.timeout(CUT_END_RECORD_SECONDS if handle.cut else CUT_RECORD_SECONDS):
            await record(handle, terminal)
    except Exception as exc:  # TimeoutError included: the frame still goes out
        log.warning("turn %s: its end was not recorded for its key (%r)", handle.turn_id, exc)


def turn_in_flight(session_id: str, turn_id: str) -> Conflict:
    """The 409 of a send while the operator's turn runs (here, or through another instance:
    its slot), naming its session when it is known, to re-attach to."""
    return Conflict(
        "a turn is already in flight for this operator; resume it or stop it first",
        detail=ErrorDetail(session=session_id or None, turn_id=turn_id or None),
    )


def _lapse(waiter: asyncio.Future[bool]) -> None:
    if not waiter.done():
        waiter.set_result(False)


def frame_base() -> int:
    """The first frame id of a turn starting now: larger than any id of an earlier turn of
    the same session (unless a turn sent 1,000 frames a millisecond), and below 2**53, so
    JavaScript reads it exactly."""
    return time.time_ns() // 1_000_000 * 1000 + 1


class StopState(StrEnum):
    STOPPED = "stopped"
    FINISHING = "finishing"  # the model had answered; the turn completes and is kept
    IDLE = "idle"


@dataclass(frozen=True)
class StopResult:
    handle: TurnHandle | None
    state: StopState


async def _stopped_before_start(handle: TurnHandle) -> None:
    raise asyncio.CancelledError


class TurnRegistry:
    """The turns in flight in this process, by operator."""

    def __init__(
        self,
        *,
        linger_seconds: float = DEFAULT_LINGER_SECONDS,
        on_finish: Callable[[TurnHandle], Awaitable[None]] | None = None,
        relay: FrameRelay | None = None,
    ) -> None:
        self.relay = relay
        self._by_operator: dict[int, TurnHandle] = {}
        self._recent: dict[str, TurnHandle] = {}
        # Each session's latest turn (running or lingering), for a re-attach by session: the
        # operator's latest turn may be in another session by then.
        self._by_session: dict[str, TurnHandle] = {}
        # Finished turns, oldest first: eviction looks only at the expired head, not at
        # every recent turn on every request (1,000 turns a second made that quadratic).
        self._finished: deque[TurnHandle] = deque()
        self._linger = linger_seconds
        self._on_finish = on_finish
        self._closing = False  # shutting down: no new turn

    async def settle(self, operator_id: int) -> None:
        """Wait (bounded) while the operator's turn is being set up, so `reserve` right
        after sees it launched, with its session, or gone. Nothing awaits between the
        return and `reserve`: another send cannot slip in between."""
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(SET_UP_WAIT_SECONDS):
                while (running := self._by_operator.get(operator_id)) is not None and not (
                    running.set_up.is_set() or running.finished
                ):
                    await running.set_up.wait()

    def reserve(self, *, turn_id: str, operator_id: int) -> TurnHandle:
        """Claim the operator's single turn slot before any work, so a refused send (409)
        has written nothing. Follow with `launch`, or `release` if set-up fails."""
        self._evict()
        if self._closing:
            raise Unavailable("the service is shutting down; send the message again in a moment")
        running = self._by_operator.get(operator_id)
        if running is not None and not running.finished:
            raise turn_in_flight(running.session_id, running.turn_id)
        handle = TurnHandle(
            turn_id=turn_id, operator_id=operator_id, session_id="", first_id=frame_base()
        )
        self._by_operator[operator_id] = handle
        return handle

    def release(self, handle: TurnHandle) -> None:
        handle.set_up.set()
        if self._by_operator.get(handle.operator_id) is handle:
            del self._by_operator[handle.operator_id]

    def launch(
        self, handle: TurnHandle, *, session_id: str, run: Callable[[TurnHandle], Awaitable[None]]
    ) -> TurnHandle:
        handle.session_id = session_id
        handle.set_up.set()
        handle.before_terminal = self._on_finish
        handle.relay = self.relay
        self._recent[handle.turn_id] = handle
        self._by_session[session_id] = handle
        if handle.stop_requested:  # stopped while its session was being resolved
            run = _stopped_before_start
        handle.task = asyncio.create_task(self._guard(handle, run), name=f"turn-{handle.turn_id}")
        return handle

    async def _guard(
        self, handle: TurnHandle, run: Callable[[TurnHandle], Awaitable[None]]
    ) -> None:
        try:
            await run(handle)
        except asyncio.CancelledError:
            if handle.stop_requested:
                await handle.emit(ErrorFrame(error="turn stopped", reason=ErrorReason.STOPPED))
            else:  # the service cut it, shutting down (TurnRegistry.shut_down)
                # Handled here: what the turn still awaits (its record, its frame's relay)
                # must not read as being cancelled (asyncio.timeout looks).
                task = asyncio.current_task()
                if task is not None:
                    task.uncancel()
                await _record_cut(handle)
                await handle.emit(
                    ErrorFrame(error=SERVICE_STOPPED_TEXT, reason=ErrorReason.CANCELLED)
                )
        except Exception:
            log.exception("turn %s failed", handle.turn_id)
            await handle.emit(ErrorFrame(error="the turn failed", reason=ErrorReason.INTERNAL))
        finally:
            if not handle.finished:
                # A run that returns without its end is this service's fault.
                await handle.emit(
                    ErrorFrame(
                        error="the turn ended without an answer", reason=ErrorReason.INTERNAL
                    )
                )
            handle.opened.set()  # a turn stopped before its session write writes none
            self._finished.append(handle)

    def handles(self) -> list[TurnHandle]:
        """Every turn whose frames this process holds: running, or lingering."""
        self._evict()
        return list(self._recent.values())

    def held(self, turn_id: str) -> TurnHandle | None:
        """The turn, if this process holds its frames (running, or lingering)."""
        return self._recent.get(turn_id)

    def for_operator(self, operator_id: int) -> TurnHandle | None:
        return self._by_operator.get(operator_id)

    def find(
        self, operator_id: int, *, session_id: str | None, turn_id: str | None
    ) -> TurnHandle | None:
        """The operator's latest turn, filtered by session or turn id (for resume)."""
        self._evict()
        if turn_id is not None:
            handle = self._recent.get(turn_id)
            return handle if handle is not None and handle.operator_id == operator_id else None
        if session_id is not None:
            handle = self._by_session.get(session_id)
            return handle if handle is not None and handle.operator_id == operator_id else None
        return self._by_operator.get(operator_id)

    def busy(self, operator_id: int) -> TurnHandle | None:
        handle = self._by_operator.get(operator_id)
        return handle if handle is not None and not handle.finished else None

    async def stop(self, operator_id: int) -> StopResult:
        """Cancel the operator's turn (the model call with it) unless it is already
        committing its answer; a turn still being set up is stopped as it launches."""
        handle = self.busy(operator_id)
        if handle is None:
            return StopResult(None, StopState.IDLE)
        if handle.committing:
            return StopResult(handle, StopState.FINISHING)
        if handle.cut:  # the service is ending it already: a second cancel would cut its end
            return StopResult(handle, StopState.STOPPED)
        handle.stop_requested = True
        if handle.task is not None:
            handle.task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await handle.task
        return StopResult(handle, StopState.STOPPED)

    async def shut_down(self, *, grace: float) -> None:
        """The service is stopping: no new turn; the turns a client here is watching, and
        those saving their answer (a cut could lose a half-done side effect), may finish
        within `grace` seconds; then every turn still running is cut (`_cut`)."""
        self._closing = True
        watched = [
            handle.task
            for handle in self._by_operator.values()
            if handle.task is not None
            and not handle.finished
            and (handle.watchers or handle.committing)
        ]
        if watched:
            log.info(
                "shutting down: %d chat turns (watched, or saving) may finish within %ss",
                len(watched),
                grace,
            )
            await asyncio.wait(watched, timeout=grace)
        await self._cut()

    async def close(self) -> None:
        """Cut what still runs, then close the relay: the terminal frames go first."""
        await self._cut()
        if self.relay is not None:
            await self.relay.close()

    async def _cut(self) -> None:
        """End every running turn: each records that it did not complete and sends its
        terminal frame (reason `cancelled`), all within CUT_SECONDS; a turn that could not
        is logged (a client re-attaching through another instance then waits until the
        turn's relayed frames expire)."""
        self._closing = True
        running = {
            handle.task: handle
            for handle in self._by_operator.values()
            if handle.task is not None and not handle.task.done()
        }
        if not running:
            return
        cutting = [task for task, handle in running.items() if not handle.cut]
        for task in cutting:  # once: a second cancel would interrupt its end
            running[task].cut = True
            task.cancel()
        _, stuck = await asyncio.wait(running, timeout=CUT_SECONDS)
        for task in stuck.intersection(cutting):
            log.warning(
                "turn %s: its end was not recorded within %ss (the database or Redis not "
                "answering); it ends with the process",
                running[task].turn_id,
                CUT_SECONDS,
            )

    def _evict(self) -> None:
        now = time.monotonic()
        while self._finished:
            handle = self._finished[0]
            if handle.finished_at is not None and now - handle.finished_at <= self._linger:
                return
            self._finished.popleft()
            if self._recent.get(handle.turn_id) is handle:
                del self._recent[handle.turn_id]
            if self._by_session.get(handle.session_id) is handle:
                del self._by_session[handle.session_id]
            if self._by_operator.get(handle.operator_id) is handle:
                del self._by_operator[handle.operator_id]
