"""The chat turn pipeline (DESIGN.md, one chat turn): validate and place a turn, then run it
detached: gather context, draft with the citation check, apply the intent, persist, answer.

`TurnPipeline` knows nothing of HTTP: a handler starts a turn with a `TurnRequest` and gets
the `TurnHandle` its frames stream from (`status`, `thinking`, `delta`, then `done` with
the ChatResponse, or `error`: bot.contracts.chat). Errors before the turn starts raise, so
the client gets a plain 4xx. The session operations are bot.chat.session_service's.

The steps it runs are their own modules: what a send asks (bot.chat.turn_request), what a
turn is made with (bot.chat.turn_parts), the context and the cited draft
(bot.chat.cited_drafting), the intent applied (bot.chat.turn_intent), and the turn's end
in its records (bot.chat.turn_ends).
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import time

from bot.agents import resolve_agent
from bot.chat.announce import announce
from bot.chat.cited_drafting import CitedDrafting
from bot.chat.coordination import ForgetSignal, claim_slot
from bot.chat.drafting import Drafting
from bot.chat.forget_delivery import ForgetDelivery
from bot.chat.forget_words import Words
from bot.chat.forgotten import owners_in_repo, record_without
from bot.chat.forgotten_frames import FrameForgets
from bot.chat.forgotten_keys import numbered_without
from bot.chat.frames import NumberedFrame, OrphanedTurn
from bot.chat.inflight import DEFAULT_LINGER_SECONDS, TurnHandle, TurnRegistry, turn_in_flight
from bot.chat.intents import IntentOutcome
from bot.chat.key_joins import KeyJoins
from bot.chat.operator_commands import command_focus
from bot.chat.pending_forgets import current_epoch
from bot.chat.placement import TurnTarget, place_turn, placements
from bot.chat.session_rows import HISTORY_IN_RESPONSE, SessionGone, new_id
from bot.chat.session_store import (
    Acknowledged,
    StoredTurn,
    TurnSession,
    open_for_turn,
    persist_turn,
)
from bot.chat.turn import FinishedTurn
from bot.chat.turn_ends import TurnEnds
from bot.chat.turn_intent import apply_intent
from bot.chat.turn_keys import (
    KeyedTurn,
    KeyState,
    TurnFrames,
    check_asked,
    claim_key,
    read_key,
    row_key,
    started_frame,
)
from bot.chat.turn_parts import TurnParts
from bot.chat.turn_record import TurnRecord
from bot.chat.turn_request import TurnRequest
from bot.clock import Clock
from bot.config import Settings
from bot.contracts.chat import DoneFrame, ErrorFrame, ErrorReason
from bot.contracts.errors import ErrorDetail
from bot.db import Database
from bot.dialogue.titles import title_from_message
from bot.errors import BadRequest, Conflict
from bot.events import SessionChange
from bot.group_commit import GroupCommit
from bot.group_read import GroupRead
from bot.runtimes.pricing import cost_usd
from bot.unanswered import Unanswered

SESSION_DELETED = ErrorFrame(
    error="the session was deleted during the turn", reason=ErrorReason.SESSION_DELETED
)


class _KeyTaken(Exception):
    """A send with the same key claimed it first, while this one was being set up."""

    def __init__(self, state: KeyState) -> None:
        super().__init__(state.turn.turn_id)
        self.state = state


class TurnPipeline:
    def __init__(
        self,
        *,
        db: Database,
        settings: Settings,
        registry: TurnRegistry,
        parts: TurnParts,
        clock: Clock,
        unanswered: Unanswered,
    ) -> None:
        self.db = db
        self.settings = settings
        self.agents = settings.agents
        self.registry = registry
        self.runtimes = parts.runtimes
        self.grounder = parts.grounder
        self.policy = parts.policy
        self.locks = parts.locks
        self.events = parts.events
        self.issues = parts.issues
        self.checkouts = parts.checkouts
        self.clock = clock
        # Requests the HTTP layer has not answered yet: a started turn's heavy work yields.
        self.unanswered = unanswered
        # Turns' session writes and their messages, committed together (SQLite: one writer),
        # each transaction holding the forget epoch first (bot.chat.pending_forgets).
        self.writes = GroupCommit(db, prelude=current_epoch)
        self.frame_forgets = FrameForgets(registry)
        # Forgets told to the other instances and the relayed frames, or owed to a Redis
        # that is away for as long as those frames live.
        self.forget_delivery = ForgetDelivery(
            db, self.frame_forgets, parts.locks, parts.events, keep_for=DEFAULT_LINGER_SECONDS
        )
        # Where each starting turn goes, read together with other turns' (bot.group_read).
        self._placements = GroupRead(db, placements)
        self.drafting = CitedDrafting(
            grounder=parts.grounder, issues=parts.issues, settings=settings
        )
        self.ends = TurnEnds(
            db=db,
            writes=self.writes,
            registry=registry,
            locks=parts.locks,
            events=parts.events,
            frame_forgets=self.frame_forgets,
            clock=clock,
        )
        self.joins = KeyJoins(db, parts.locks, registry)
        if registry.relay is not None:  # turns of killed instances, ended by readers here
            registry.relay.on_owner_gone = self.record_owner_gone

    async def close(self) -> None:
        await self.writes.close()  # the writes of the turns just stopped
        await self.forget_delivery.close()

    async def note_left_turns(self) -> int:
        """At start-up: turns a killed process left acknowledged but unstored, noted in
        their sessions (bot.chat.left_turns). How many were noted."""
        return await self.ends.note_left_turns()

    async def record_owner_gone(self, turn: OrphanedTurn) -> None:
        """A reader ended a turn whose instance went away (bot.chat.frames): noted in its
        session, and its end recorded for its key (bot.chat.turn_ends)."""
        await self.ends.record_owner_gone(turn)

    # -- turns ---------------------------------------------------------------------------

    async def send(self, request: TurnRequest) -> TurnFrames:
        """A turn for the request: started, or, for a key sent before, that key's turn
        (attached while it runs, its recorded end after; bot.chat.turn_keys). The same key
        with another message is refused (KeyReused) and changes nothing."""
        if request.key is None:
            return await self.start_turn(request)
        key = row_key(request.operator_id, request.key)
        state = await self.db.run(read_key, key)
        if state is None:
            try:
                return await self.start_turn(request)
            except _KeyTaken as taken:
                state = taken.state
            except Conflict:
                # The operator's turn in flight may be this key's, sent a moment before, here
                # or through another instance (its claim on its way: bot.chat.key_joins).
                state = await self.joins.claimed(request.operator_id, key)
                if state is None:
                    raise
        check_asked(state, request.asked())
        return await self.joins.frames(state, operator_id=request.operator_id, key=key)

    async def start_turn(self, request: TurnRequest) -> TurnHandle:
        """Validate, resolve the session (a read), and start the turn detached; errors raise
        here, before any stream begins, so the client gets a plain 4xx. The session is
        written by the turn itself, after its first frame (`_open`)."""
        message = request.message
        if not message.strip():
            raise BadRequest("message is required", detail=ErrorDetail(field="message"))
        if request.agent is not None:
            resolve_agent(self.agents, request.agent)
        # A turn of this operator still being set up: its 409 names its session once it has one.
        await self.registry.settle(request.operator_id)
        handle = self.registry.reserve(turn_id=new_id(), operator_id=request.operator_id)
        # The slot names the key: a send with it through another instance joins this turn.
        key = request.row_key()
        acquired = False
        try:
            # Through another instance, a turn being set up is waited for, as `settle` does.
            held = await claim_slot(
                self.locks,
                request.operator_id,
                handle.turn_id,
                session_id=request.session_id,
                key=key,
            )
            if held is not None:
                raise turn_in_flight(held.session, held.turn_id)
            acquired = True
            target = place_turn(
                await self._placements.get((request.operator_id, request.session_id)),
                session_id=request.session_id,
                agent=request.agent,
                # "discuss #N" typed in Chat focuses the session on N (operator_commands).
                focus=command_focus(message, request.focus),
                default_agent="default",
            )
            if target.agent not in self.agents:
                raise BadRequest(
                    f"this session's agent {target.agent!r} is no longer configured;"
                    " name another agent",
                    detail=ErrorDetail(field="agent", known=sorted(self.agents)),
                )
            await self.locks.describe(
                request.operator_id, handle.turn_id, target.session_id, key=key
            )
            if key is not None:
                await self._claim_key(key, request, handle, target)
            handle.record_end = functools.partial(self.ends.record_end, key)
        except BaseException:
            self.registry.release(handle)
            if acquired:
                await self.locks.release(request.operator_id, handle.turn_id)
            raise
        return self.registry.launch(
            handle,
            session_id=target.session_id,
            run=lambda running: self._run(running, request, target),
        )

    async def _claim_key(
        self, key: str, request: TurnRequest, handle: TurnHandle, target: TurnTarget
    ) -> None:
        """Claim the request's key for this turn, the last step before it launches (a
        refusal before writes no claim); its end is recorded as its terminal frame goes out.
        _KeyTaken if a send with the same key claimed it first."""
        turn = KeyedTurn(request.asked(), handle.turn_id, target.session_id)
        taken = await self.writes.run(claim_key, key, turn, clock=self.clock)
        if taken is not None:
            raise _KeyTaken(taken)

    async def _run(self, handle: TurnHandle, request: TurnRequest, target: TurnTarget) -> None:
        with self.locks.keep(handle.operator_id, handle.turn_id):
            # The first frame goes out before any write: it names the session and the turn,
            # which are already decided (spec: the SSE stream starts with `status`).
            await handle.emit(started_frame(target.session_id, handle.turn_id, request.message))
            ts = await self._open(handle, request, target)
            if ts is not None and ts.created:
                # Listed from now on, whatever becomes of the turn: other clients show it.
                await announce(self.events, request.operator_id, ts.id, SessionChange.CREATED)
            if ts is not None:
                await self.unanswered.quiet()  # requests still waiting go first
                await self._turn(handle, request, ts)

    async def _open(
        self, handle: TurnHandle, request: TurnRequest, target: TurnTarget
    ) -> TurnSession | None:
        """Write the turn's session, batched with other turns' writes. A stop meanwhile lets
        the write land first, so a client told the turn stopped finds the session the first
        frame named; a cut (the service stopping) meanwhile lets it land and then records the
        cut in it. None (and an error frame) if the session was deleted since."""
        # Kept with it: the first frame acknowledged the message (bot.chat.left_turns).
        key = request.row_key()
        acknowledged = Acknowledged(handle.turn_id, request.message, key)
        write = asyncio.ensure_future(
            self.writes.run(
                open_for_turn, request.operator_id, target, turn=acknowledged, clock=self.clock
            )
        )
        try:
            ts = await asyncio.shield(write)
        except SessionGone:
            await handle.emit(SESSION_DELETED)
            return None
        except asyncio.CancelledError:
            with contextlib.suppress(Exception):
                self._cuttable(handle, request, await write)
            raise
        finally:
            handle.opened.set()
        self._cuttable(handle, request, ts)
        return ts

    def _cuttable(self, handle: TurnHandle, request: TurnRequest, ts: TurnSession) -> None:
        """The session exists: cut by a shutdown from here on (its write just landed, or the
        cut came while it was written), the turn's session keeps the message and says so."""
        handle.on_cut = functools.partial(self.ends.record_cut, request=request, ts=ts)

    async def _turn(self, handle: TurnHandle, request: TurnRequest, ts: TurnSession) -> None:
        """Gather context, draft (with the citation check), apply the intent, persist,
        answer. A failure ends the turn with an error frame and writes nothing."""
        started = time.perf_counter()
        agent = resolve_agent(self.agents, ts.agent)
        if self.checkouts is not None:
            agent = await self.checkouts.for_agent(agent)  # fresh enough: merged memory shows
        context = await self.drafting.gather(request.message, agent, ts, handle.emit)
        runtime = self.runtimes(agent)
        drafted = await self.drafting.draft_cited(
            Drafting(runtime, request.message, ts, agent, handle.emit), context
        )
        if drafted is None:
            return
        draft, context = drafted
        handle.committing = True  # from here a stop no longer cancels (see TurnHandle)
        outcome = await apply_intent(self.policy, request, handle, ts, agent, draft.trailer)
        model = draft.route.model if draft.route else runtime.model
        finished = FinishedTurn(
            session=ts,
            turn_id=handle.turn_id,
            draft=draft,
            outcome=outcome,
            context=context,
            model=model,
            endpoint=draft.route.endpoint if draft.route else runtime.name,
            requested_model=runtime.model,
            cost_usd=cost_usd(self.settings.model_prices, model, draft.usage),
            total_ms=round((time.perf_counter() - started) * 1000, 1),
        )
        stored = await self._persist(handle, request, finished)
        if outcome.forgotten is not None or outcome.forgotten_in:
            await self._forgotten_elsewhere(agent.repo, request, ts, outcome)
        if stored is None:
            return
        await announce(self.events, request.operator_id, ts.id, SessionChange.UPDATED)
        history = [*ts.history, *stored.messages][-HISTORY_IN_RESPONSE:]
        done = NumberedFrame.of(0, DoneFrame(response=finished.response(history)))
        for words in self._forgotten(outcome, stored):  # as stored, so as sent
            done = numbered_without(done, words)
        await handle.emit(done.frame)

    @staticmethod
    def _forgotten(outcome: IntentOutcome, stored: StoredTurn) -> list[Words]:
        """The words the turn's messages were stored without: its own forget's, and those of
        the forgets raised while it ran (bot.chat.pending_forgets)."""
        said = [] if outcome.forgotten is None else [outcome.forgotten]
        return [Words(words) for words in dict.fromkeys([*said, *stored.forgotten])]

    async def _forgotten_elsewhere(
        self, repo: str, request: TurnRequest, ts: TurnSession, outcome: IntentOutcome
    ) -> None:
        """After a forget: the frames of the repository's turns, held here and relayed
        (with Redis away, once it is back: bot.chat.forget_delivery), without the words of a
        `forget that <words>` (bot.chat.forgotten_frames), and every session it changed
        announced to its operator as `forgotten`, so that clients showing it read it again:
        the forget's own session too, whose earlier messages may have said the words (its
        client reads it once the turn has ended)."""
        changed = {(c.operator_id, c.session_id) for c in outcome.forgotten_in}
        if outcome.forgotten is not None:
            owners = await self.db.run(owners_in_repo, repo, self.frame_forgets.held_here())
            framed = await self.frame_forgets.forget_held(Words(outcome.forgotten), set(owners))
            changed |= {(owners[session_id], session_id) for session_id in framed}
            # The relayed frames, and the other instances' own copies (`frames_forgotten`).
            changed |= await self.forget_delivery.send(ForgetSignal(repo, outcome.forgotten))
        for operator_id, session_id in sorted(changed):
            await announce(self.events, operator_id, session_id, SessionChange.FORGOTTEN)

    async def frames_forgotten(self, signal: ForgetSignal) -> None:
        """A `forget that <words>` run through any instance (this one too: done already, it
        changes nothing): the frames this process holds of the repository's turns, and
        those it keeps for Redis, without the words (bot.chat.forgotten_frames). Those
        relayed were done by the instance that ran it, and its clients were told."""
        held = self.frame_forgets.held_here()
        if not held:
            return
        owners = await self.db.run(owners_in_repo, signal.repo, held)
        await self.frame_forgets.forget_held(Words(signal.words), set(owners))

    async def _persist(
        self, handle: TurnHandle, request: TurnRequest, finished: FinishedTurn
    ) -> StoredTurn | None:
        """Both messages and the session changes in one transaction, without the words of
        any forget raised while the turn ran (its frames and its key's record leave them
        out too); None (and an error frame) when the session was deleted meanwhile."""
        ts = finished.session
        record = TurnRecord(
            turn_id=handle.turn_id,
            user_message=request.message,
            reply=finished.reply,
            reasoning=finished.draft.reasoning,
            intent=finished.outcome.intent.value,
            meta=finished.meta(),
            title=title_from_message(request.message) if ts.title is None else None,
            decision=finished.outcome.decision,
            pending=finished.outcome.pending,
        )
        if finished.outcome.forgotten is not None:
            record = record_without(record, finished.outcome.forgotten)
        try:
            stored = await self.writes.run(
                persist_turn, request.operator_id, ts.id, record, clock=self.clock
            )
        except SessionGone:
            await handle.emit(SESSION_DELETED)
            return None
        forgotten = self._forgotten(finished.outcome, stored)
        if forgotten and handle.record_end is not None:  # its key's record leaves them out
            key = request.row_key()
            end = functools.partial(self.ends.record_end, key, forgotten=tuple(forgotten))
            handle.record_end = end
        if stored.forgotten:  # forgets raised while it ran: its frames so far leave them out
            await self.frame_forgets.in_turn(handle, [Words(words) for words in stored.forgotten])
        return stored
