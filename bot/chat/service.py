"""The chat turn pipeline and the session operations around it (DESIGN.md, one chat turn).

`ChatService` knows nothing of HTTP: handlers call it with values and get values or domain
errors back. A turn runs detached in the `TurnRegistry`; its frames are `status`, `thinking`,
`delta`, then `done` (the full ChatResponse) or `error`.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

from bot.agents import resolve_agent
from bot.background import BackgroundTasks
from bot.chat import sessions as store
from bot.chat.checkout import ManagedCheckouts
from bot.chat.coordination import LocalTurnLocks, TurnLocks
from bot.chat.grounding import Grounder, Grounding, NoGrounding, Verdict
from bot.chat.inflight import Emit, StopState, TurnHandle, TurnRegistry
from bot.chat.intents import (
    DraftOnlyPolicy,
    IntentContext,
    IntentOutcome,
    IntentPolicy,
    held,
    proposal_key,
    proposes,
)
from bot.chat.issue_context import IssueContextLoader
from bot.chat.operator_commands import command_focus
from bot.chat.progress import progress_while
from bot.chat.prompt import messages, system_prompt
from bot.chat.summariser import Summariser
from bot.chat.summary import SummarySink
from bot.chat.titles import title_from_message
from bot.chat.trailer import Intent, Trailer, TrailerFilter, split_reply
from bot.chat.turn import Draft, FinishedTurn, TurnContext, clean_grounding
from bot.clock import Clock, utcnow
from bot.config import AgentConfig, Settings
from bot.db import Database
from bot.errors import BadRequest, Conflict, NotFound
from bot.events import OperatorEvents, SessionChange
from bot.group_commit import GroupCommit
from bot.group_read import GroupRead
from bot.runtimes.base import (
    ContextBudget,
    Delta,
    Route,
    Runtime,
    RuntimeError_,
    RuntimeEvent,
    RuntimeRequest,
    Status,
    Thinking,
    TurnFacts,
    Usage,
    closing_stream,
)
from bot.runtimes.pricing import cost_usd
from bot.unanswered import Unanswered

log = logging.getLogger(__name__)
RuntimeFactory = Callable[[AgentConfig], Runtime]
# Turns retrieving at once. Retrieval is CPU work on the thread pool; 1,000 turns starting
# within a second queued 1,000 jobs there, ahead of the reads that new requests need before
# their first frame (auth, the session). More than a few at once gains nothing under the GIL.
GROUNDING_AT_ONCE = 4
SESSION_DELETED: dict[str, Any] = {
    "type": "error",
    "error": "the session was deleted during the turn",
    "reason": "session_deleted",
}
REDRAFT_HINT = (
    "Your previous draft cited none of the retrieved context. Answer again, citing the hits "
    "(#issue, session id or their distinctive words) where they are relevant."
)


@dataclass(frozen=True)
class TurnRequest:
    operator_id: int
    message: str
    session_id: str | None = None
    agent: str | None = None
    focus: Any = store.UNSET  # int, None (clear focus) or UNSET (keep)


@dataclass(frozen=True)
class _Drafting:
    """Who drafts a turn's reply, for whom and where its frames go: what every draft of one
    turn shares (the context it drafts from may widen between drafts)."""

    runtime: Runtime
    request: TurnRequest
    session: store.TurnSession
    agent: AgentConfig
    emit: Any


class ChatService:
    def __init__(
        self,
        *,
        db: Database,
        settings: Settings,
        runtimes: RuntimeFactory,
        registry: TurnRegistry,
        background: BackgroundTasks,
        grounder: Grounder | None = None,
        policy: IntentPolicy | None = None,
        summary_sinks: tuple[SummarySink, ...] = (),
        locks: TurnLocks | None = None,
        events: OperatorEvents | None = None,
        issues: IssueContextLoader | None = None,
        checkouts: ManagedCheckouts | None = None,
        clock: Clock = utcnow,
        unanswered: Unanswered | None = None,
    ) -> None:
        self.db = db
        # Requests the HTTP layer has not answered yet: a started turn's heavy work yields.
        self.unanswered = unanswered or Unanswered()
        # Turns' session writes and their messages, committed together (SQLite: one writer).
        self.writes = GroupCommit(db)
        # Where each starting turn goes, read together with other turns' (bot.group_read).
        self._placements = GroupRead(db, store.placements)
        self._grounding = asyncio.Semaphore(GROUNDING_AT_ONCE)
        self.settings = settings
        self.agents = settings.agents
        self.runtimes = runtimes
        self.registry = registry
        self.background = background
        self.grounder: Grounder = grounder or NoGrounding()
        self.policy: IntentPolicy = policy or DraftOnlyPolicy()
        self.summary_sinks = summary_sinks
        self.locks: TurnLocks = locks or LocalTurnLocks()
        self.events = events
        # Reads the focused issue from GitHub for each turn; None without a GitHub App.
        self.issues = issues
        # Managed clones of each agent's repository (with a GitHub App); None: configured.
        self.checkouts = checkouts
        self.clock = clock
        self.summaries = Summariser(
            db=db,
            agents=self.agents,
            runtimes=runtimes,
            background=background,
            sinks=summary_sinks,
            events=events,
        )

    async def session_updated(self, operator_id: int, session_id: str) -> None:
        """Something outside a turn changed the session (a publish cleared its Decision
        draft, a filing its proposal): tell the operator's clients."""
        await self._announce(operator_id, session_id, SessionChange.UPDATED)

    async def _announce(self, operator_id: int, session_id: str, change: SessionChange) -> None:
        """A session change on the operator's events stream (never fails the caller)."""
        if self.events is not None:
            await asyncio.to_thread(self.events.session_changed, operator_id, session_id, change)

    # -- turns ---------------------------------------------------------------------------

    async def start_turn(self, request: TurnRequest) -> TurnHandle:
        """Validate, resolve the session (a read), and start the turn detached; errors raise
        here, before any stream begins, so the client gets a plain 4xx. The session is
        written by the turn itself, after its first frame (`_open`)."""
        message = request.message
        if not message.strip():
            raise BadRequest("message is required", detail={"field": "message"})
        if request.agent is not None:
            resolve_agent(self.agents, request.agent)
        handle = self.registry.reserve(turn_id=store.new_id(), operator_id=request.operator_id)
        acquired = False
        try:
            holder = await self.locks.acquire(request.operator_id, handle.turn_id)
            if holder is not None:
                held = await self.locks.holder(request.operator_id) or {}
                raise Conflict(
                    "a turn is already in flight for this operator; resume it or stop it first",
                    detail={"session": held.get("session") or None, "turn_id": holder or None},
                )
            acquired = True
            target = store.place_turn(
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
                    detail={"field": "agent", "known": sorted(self.agents)},
                )
            await self.locks.describe(request.operator_id, handle.turn_id, target.session_id)
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

    async def _run(
        self, handle: TurnHandle, request: TurnRequest, target: store.TurnTarget
    ) -> None:
        with self.locks.keep(handle.operator_id, handle.turn_id):
            # The first frame goes out before any write: it names the session and the turn,
            # which are already decided (spec: the SSE stream starts with `status`).
            await handle.emit(
                {
                    "type": "status",
                    "text": "turn started",
                    "session": target.session_id,
                    "turn_id": handle.turn_id,
                    # A client re-attaching after a reload shows what was asked.
                    "message": request.message,
                }
            )
            ts = await self._open(handle, request, target)
            if ts is not None:
                await self.unanswered.quiet()  # requests still waiting go first
                await self._turn(handle, request, ts)

    async def _open(
        self, handle: TurnHandle, request: TurnRequest, target: store.TurnTarget
    ) -> store.TurnSession | None:
        """Write the turn's session, batched with other turns' writes. A stop meanwhile lets
        the write land first, so a client told the turn stopped finds the session the first
        frame named. None (and an error frame) if the session was deleted since."""
        write = asyncio.ensure_future(
            self.writes.run(store.open_for_turn, request.operator_id, target, clock=self.clock)
        )
        try:
            return await asyncio.shield(write)
        except store.SessionGone:
            await handle.emit(SESSION_DELETED)
            return None
        except asyncio.CancelledError:
            with contextlib.suppress(Exception):
                await write
            raise
        finally:
            handle.opened.set()

    async def _turn(self, handle: TurnHandle, request: TurnRequest, ts: store.TurnSession) -> None:
        """Gather context, draft (with the citation check), apply the intent, persist,
        answer. A failure ends the turn with an error frame and writes nothing."""
        started = time.perf_counter()
        agent = resolve_agent(self.agents, ts.agent)
        if self.checkouts is not None:
            agent = await self.checkouts.for_agent(agent)  # fresh enough: merged memory shows
        context = await self._gather(request.message, agent, ts, handle.emit)
        runtime = self.runtimes(agent)
        drafted = await self._draft_cited(
            _Drafting(runtime, request, ts, agent, handle.emit), context
        )
        if drafted is None:
            return
        draft, context = drafted
        handle.committing = True  # from here a stop no longer cancels (see TurnHandle)
        outcome = await self._apply_intent(request, handle, ts, agent, draft.trailer)
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
        if stored is None:
            return
        change = SessionChange.CREATED if ts.created else SessionChange.UPDATED
        await self._announce(request.operator_id, ts.id, change)
        history = [*ts.history, *stored][-store.HISTORY_IN_RESPONSE :]
        await handle.emit({"type": "done", "response": finished.response(history)})

    async def _gather(
        self, message: str, agent: AgentConfig, ts: store.TurnSession, emit: Any
    ) -> TurnContext:
        """Retrieval, and the focused issue read from GitHub (neither ever fails the turn)."""
        grounding = clean_grounding(await self._ground(message, agent, ts.focus, emit))
        if ts.focus is None or self.issues is None:
            return TurnContext(grounding)
        try:
            issue = await self.issues.load(agent.repo, ts.focus)
        except Exception as exc:
            reason = getattr(exc, "message", None) or type(exc).__name__
            log.warning("focused issue #%s not read: %s", ts.focus, reason)
            await emit({"type": "status", "text": f"issue #{ts.focus} unavailable"})
            return TurnContext(grounding, issue_error=str(reason)[:200])
        await emit(
            {"type": "status", "text": f"issue #{ts.focus} · {len(issue.comments)} comments"}
        )
        return TurnContext(grounding, issue=issue)

    async def _draft_cited(
        self, drafting: _Drafting, context: TurnContext
    ) -> tuple[Draft, TurnContext] | None:
        """Draft; if hits were kept and the draft cites none, widen once and draft again.
        None when the turn failed (its error frame is sent)."""
        emit, agent, focus = drafting.emit, drafting.agent, drafting.session.focus
        try:
            async with asyncio.timeout(self.settings.turn_timeout_seconds):
                draft = await self._draft(drafting, context, number=1)
                grounding = context.grounding
                if grounding.kept_hits and not self.grounder.cites(draft.reply, grounding):
                    await emit({"type": "status", "text": "no citation · widening retrieval"})
                    message = drafting.request.message
                    widened = await self._widen(message, agent, focus, grounding, emit)
                    context = replace(context, grounding=clean_grounding(widened))
                    draft = await self._redraft(drafting, context, first=draft)
        except RuntimeError_ as exc:
            await emit({"type": "error", "error": exc.message, "reason": "runtime"})
            return None
        except TimeoutError:
            await emit(
                {"type": "error", "error": "the model did not finish in time", "reason": "timeout"}
            )
            return None
        return draft, context

    async def _persist(
        self, handle: TurnHandle, request: TurnRequest, finished: FinishedTurn
    ) -> list[dict[str, Any]] | None:
        """Both messages and the session changes in one transaction; None (and an error
        frame) when the session was deleted meanwhile."""
        ts = finished.session
        record = store.TurnRecord(
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
        try:
            return await self.writes.run(
                store.persist_turn, request.operator_id, ts.id, record, clock=self.clock
            )
        except store.SessionGone:
            await handle.emit(SESSION_DELETED)
            return None

    async def _redraft(self, drafting: _Drafting, context: TurnContext, *, first: Draft) -> Draft:
        """The grounded second draft; if it fails, the first draft stands (shown again)."""
        emit = drafting.emit
        try:
            second = await self._draft(drafting, context, number=2, hint=REDRAFT_HINT)
        except RuntimeError_ as exc:
            log.warning("re-draft failed, keeping the first draft: %s", exc.message)
            await emit({"type": "status", "text": "re-draft failed · keeping the first draft"})
            await emit(_delta(first.reply, 1, replace=True))
            return first
        for name, count in first.usage.items():  # both drafts were paid for
            second.usage[name] = second.usage.get(name, 0) + count
        second.redrafted = True
        return second

    async def _ground(
        self, query: str, agent: AgentConfig, focus: int | None, emit: Any
    ) -> Grounding:
        try:
            async with self._grounding:
                return await self.grounder.ground(query=query, agent=agent, focus=focus, emit=emit)
        except Exception as exc:  # retrieval never fails the turn (spec: Retrieve grounding)
            log.warning("retrieval unavailable: %s", type(exc).__name__)
            await emit({"type": "status", "text": "retrieve unavailable"})
            return Grounding(
                available=False,
                prompt_block="Prior Steelframe context: (retrieval unavailable)",
                meta={"error": type(exc).__name__},
            )

    async def _widen(
        self, query: str, agent: AgentConfig, focus: int | None, previous: Grounding, emit: Any
    ) -> Grounding:
        try:
            return await self.grounder.widen(
                query=query, agent=agent, focus=focus, previous=previous, emit=emit
            )
        except Exception as exc:
            log.warning("widening retrieval failed: %s", type(exc).__name__)
            return previous

    async def _draft(
        self, drafting: _Drafting, context: TurnContext, *, number: int, hint: str | None = None
    ) -> Draft:
        """One draft streamed: thinking and visible reply tokens go out as frames (the
        trailer held back), usage, route and budget are kept."""
        runtime_request = _runtime_request(
            drafting.request, drafting.session, drafting.agent, context, hint
        )
        streamed = _DraftStream(drafting.emit, number)
        if number > 1:
            # Clients drop what they showed of the earlier draft now, even if this one
            # turns out to stream no visible text.
            await drafting.emit(_delta("", number, replace=True))
        # Closed as soon as the turn ends, a stop landing between two events included, so
        # the model call (its HTTP stream) ends with it rather than when it is collected.
        async with closing_stream(drafting.runtime.stream(runtime_request)) as events:
            async for event in events:
                await streamed.take(event)
        return await streamed.finish()

    async def _apply_intent(
        self,
        request: TurnRequest,
        handle: TurnHandle,
        ts: store.TurnSession,
        agent: AgentConfig,
        trailer: Trailer,
    ) -> IntentOutcome:
        context = IntentContext(
            operator_id=request.operator_id,
            turn_id=handle.turn_id,
            message=request.message,
            trailer=trailer,
            session=ts,
            agent=agent,
        )
        try:
            # Filing and publishing wait on GitHub's write pacing: say so while they do.
            async with progress_while(handle.emit, "waiting on GitHub"):
                return await self.policy.apply(context)
        except Exception as exc:
            log.warning("intent %s could not be applied: %s", trailer.intent, exc)
            message = getattr(exc, "message", "the action could not be completed")
            if not proposes(trailer):
                # A confirmed proposal that failed to file stays pending (UNSET keeps it).
                outcome = IntentOutcome(intent=trailer.intent, notes=[f"not applied: {message}"])
            else:
                # Keep the proposal so the operator can confirm it again once GitHub answers.
                outcome = held(trailer, f"not applied: {message}", key=proposal_key(handle.turn_id))
            outcome.reply_suffix = f"\n\n(Not done: {message})"
            return outcome

    # -- sessions ------------------------------------------------------------------------

    async def _settled(self, operator_id: int) -> None:
        """Wait for the session write of a turn that has started here: its first frame
        named the session before it was written, and this instance answers about sessions
        as if it had been written first. (Another instance may not see it for the few
        milliseconds the batched write takes: docs/api.md, Chat.)"""
        handle = self.registry.for_operator(operator_id)
        if handle is not None and handle.task is not None:
            await handle.opened.wait()

    def _refuse_while_busy(self, operator_id: int, action: str) -> None:
        running = self.registry.busy(operator_id)
        if running is not None:
            raise Conflict(
                f"a turn is in flight: stop it or let it finish before you {action}",
                detail={"session": running.session_id or None, "turn_id": running.turn_id},
            )

    async def new_session(
        self, operator_id: int, *, title: str | None, issue: int | None, agent: str | None
    ) -> dict[str, Any]:
        self._refuse_while_busy(operator_id, "start a new chat")
        agent_config = resolve_agent(self.agents, agent)
        if issue is not None and self.issues is not None:
            # Discuss on an issue GitHub does not have fails here, not at Publish.
            if not await self.issues.exists(agent_config.repo, issue):
                raise NotFound(
                    f"issue #{issue} not found in {agent_config.repo}",
                    detail={"field": "issue", "repo": agent_config.repo},
                )
        row, previous = await self.db.run(
            store.new_session,
            operator_id,
            agent=agent_config.name,
            title=title,
            issue=issue,
            clock=self.clock,
        )
        await self._announce(operator_id, row.id, SessionChange.CREATED)
        if previous is not None:
            await self._announce(operator_id, previous, SessionChange.UPDATED)
            self.summaries.spawn(previous)
        return {**store.session_json(row, turns=0, active=True), "previous_session": previous}

    async def summarise(self, session_id: str) -> None:
        await self.summaries.summarise(session_id)

    async def resume_pending_summaries(self) -> None:
        """At start-up: summaries a crash or restart left undone."""
        await self.summaries.resume_pending()

    async def list_sessions(self, operator_id: int) -> list[dict[str, Any]]:
        await self._settled(operator_id)
        return await self.db.run(store.list_sessions, operator_id)

    async def get_session(self, operator_id: int, session_id: str) -> dict[str, Any]:
        await self._settled(operator_id)
        found = await self.db.run(store.get_session, operator_id, session_id)
        return {**found, "turn_in_flight": await self.turn_in_flight(operator_id, session_id)}

    async def open_session(self, operator_id: int, session_id: str) -> dict[str, Any]:
        """Reopen a session: the next message goes to it; the one left is summarised."""
        await self._settled(operator_id)
        opened, left = await self.db.run(store.open_session, operator_id, session_id)
        if left is not None:
            self.summaries.spawn(left)
        return {**opened, "turn_in_flight": await self.turn_in_flight(operator_id, session_id)}

    async def turn_in_flight(self, operator_id: int, session_id: str) -> str | None:
        """The id of the operator's turn still running in this session (here, or on another
        instance when the turn locks are shared), so a client re-attaches only to a live
        turn and never replays a finished one."""
        running = self.registry.busy(operator_id)
        if running is not None:
            return running.turn_id if running.session_id == session_id else None
        held = await self.locks.holder(operator_id)
        if held and held.get("session") == session_id:
            return held.get("turn_id") or None
        return None

    async def history(
        self, operator_id: int, *, session_id: str | None, limit: int
    ) -> dict[str, Any]:
        await self._settled(operator_id)
        return await self.db.run(store.history, operator_id, session_id=session_id, limit=limit)

    async def delete_session(self, operator_id: int, session_id: str) -> None:
        """Delete a session; a turn running in it is stopped first (its model call too)."""
        await self._settled(operator_id)
        running = self.registry.busy(operator_id)
        if running is not None and running.session_id == session_id:
            if (await self.registry.stop(operator_id)).state is StopState.FINISHING:
                self._refuse_while_busy(operator_id, "delete its session")
        await self.db.run(store.delete_session, operator_id, session_id)
        await self._announce(operator_id, session_id, SessionChange.DELETED)

    async def clear(self, operator_id: int, *, session_id: str | None) -> dict[str, Any]:
        self._refuse_while_busy(operator_id, "clear the conversation")
        cleared = await self.db.run(store.clear_session, operator_id, session_id=session_id)
        if cleared["session"] is not None:
            await self._announce(operator_id, cleared["session"], SessionChange.UPDATED)
        return cleared

    async def stop(self, operator_id: int) -> dict[str, Any]:
        """Stop the operator's turn here, or signal the instance that runs it. A turn whose
        model has already answered is finishing: it completes and is kept."""
        result = await self.registry.stop(operator_id)
        if result.handle is not None:
            stopped = result.state is StopState.STOPPED
            answer = {"stopped": stopped, "session": result.handle.session_id or None}
            answer["turn_id"] = result.handle.turn_id
            return answer if stopped else {**answer, "reason": result.state.value}
        held = await self.locks.holder(operator_id)
        if held is None:
            return {"stopped": False}
        await self.locks.signal_stop(operator_id)
        return {"stopped": True, "session": held.get("session") or None, "turn_id": held["turn_id"]}


class _DraftStream:
    """One draft as its runtime events arrive: frames out, the rest kept for the Draft."""

    def __init__(self, emit: Emit, number: int) -> None:
        self.emit = emit
        self.number = number
        self.visible = TrailerFilter()
        self.reasoning: list[str] = []
        self.draft = Draft(reply="", trailer=Trailer(), reasoning="")
        self.started = time.perf_counter()

    async def take(self, event: RuntimeEvent) -> None:
        draft = self.draft
        if draft.first_frame_ms is None and isinstance(event, Thinking | Delta):
            draft.first_frame_ms = round((time.perf_counter() - self.started) * 1000, 1)
        if isinstance(event, Delta):
            text = self.visible.feed(event.text)
            if text:
                await self.emit(_delta(text, self.number, replace=False))
        elif isinstance(event, Thinking):
            self.reasoning.append(event.text)
            await self.emit({"type": "thinking", "text": event.text, "draft": self.number})
        elif isinstance(event, Usage):
            draft.usage["input_tokens"] += event.input_tokens
            draft.usage["output_tokens"] += event.output_tokens
        elif isinstance(event, Route):
            draft.route = event
        elif isinstance(event, ContextBudget):
            draft.budget = event
        elif isinstance(event, Status):
            await self.emit({"type": "status", "text": event.text})

    async def finish(self) -> Draft:
        """The held-back tail out, the reply split from its trailer."""
        tail = self.visible.flush()
        if tail.strip():
            await self.emit(_delta(tail, self.number, replace=False))
        self.draft.reply, self.draft.trailer = split_reply(self.visible.text)
        self.draft.reasoning = "".join(self.reasoning)
        return self.draft


def _runtime_request(
    request: TurnRequest,
    ts: store.TurnSession,
    agent: AgentConfig,
    context: TurnContext,
    hint: str | None,
) -> RuntimeRequest:
    """What the model is sent for one draft: the system prompt, the conversation, the facts."""
    grounding = context.grounding
    facts = TurnFacts(
        message=request.message,
        focus=ts.focus,
        hits=grounding.hits,
        recency_fallback=grounding.recency_fallback,
        committed_memory=grounding.committed_memory,
        task=grounding.task,
        retrieval_available=grounding.available,
        redraft_hint=hint,
        memory_answers=grounding.verdict is not Verdict.NOTHING,
    )
    system = system_prompt(
        agent=agent,
        focus=ts.focus,
        grounding=grounding,
        issue_block=context.issue_block,
        redraft_hint=hint,
    )
    return RuntimeRequest(
        system=system,
        messages=messages(ts.history, request.message),
        facts=facts,
        checkout=agent.checkout,
    )


def _delta(text: str, draft: int, *, replace: bool) -> dict[str, Any]:
    frame: dict[str, Any] = {"type": "delta", "text": text, "draft": draft}
    if replace:
        frame["replace"] = True
    return frame


__all__ = ["ChatService", "Intent", "RuntimeFactory", "TurnRequest"]
