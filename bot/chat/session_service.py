"""The session operations of Chat: list, read, open, start, clear, delete a session, stop
its turn, and the summaries made when one is left. Knows nothing of HTTP; answers with the
contracts of bot.contracts.chat. Turns themselves run in bot.chat.pipeline.
"""

from __future__ import annotations

import msgspec

from bot.agents import resolve_agent
from bot.chat.announce import announce
from bot.chat.coordination import TurnLocks
from bot.chat.inflight import StopState, TurnRegistry
from bot.chat.issue_context import IssueContextLoader
from bot.chat.message_ids import holds_turn
from bot.chat.session_store import clear_session, delete_session, new_session, open_session
from bot.chat.session_views import get_session, history, list_sessions, session_view
from bot.chat.summariser import Summariser
from bot.clock import Clock
from bot.config import AgentConfig
from bot.contracts.chat import (
    Cleared,
    History,
    ListedSession,
    NewSession,
    Session,
    StopResult,
)
from bot.contracts.errors import ErrorDetail
from bot.db import Database
from bot.errors import Conflict, NotFound
from bot.events import OperatorEvents, SessionChange


class SessionService:
    def __init__(
        self,
        *,
        db: Database,
        agents: dict[str, AgentConfig],
        registry: TurnRegistry,
        locks: TurnLocks,
        summaries: Summariser,
        events: OperatorEvents | None,
        issues: IssueContextLoader | None,
        clock: Clock,
    ) -> None:
        self.db = db
        self.agents = agents
        self.registry = registry
        self.locks = locks
        self.summaries = summaries
        self.events = events
        # Checks a Discuss session's issue exists; None without a GitHub App.
        self.issues = issues
        self.clock = clock

    async def session_updated(self, operator_id: int, session_id: str) -> None:
        """Something outside a turn changed the session (a publish cleared its Decision
        draft, a filing its proposal): tell the operator's clients."""
        await announce(self.events, operator_id, session_id, SessionChange.UPDATED)

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
                detail=ErrorDetail(session=running.session_id or None, turn_id=running.turn_id),
            )

    async def new_session(
        self, operator_id: int, *, title: str | None, issue: int | None, agent: str | None
    ) -> NewSession:
        self._refuse_while_busy(operator_id, "start a new chat")
        agent_config = resolve_agent(self.agents, agent)
        if issue is not None and self.issues is not None:
            # Discuss on an issue GitHub does not have fails here, not at Publish.
            if not await self.issues.exists(agent_config.repo, issue):
                raise NotFound(
                    f"issue #{issue} not found in {agent_config.repo}",
                    detail=ErrorDetail(field="issue", repo=agent_config.repo),
                )
        row, previous = await self.db.run(
            new_session,
            operator_id,
            agent=agent_config.name,
            title=title,
            issue=issue,
            clock=self.clock,
        )
        await announce(self.events, operator_id, row.id, SessionChange.CREATED)
        if previous is not None:
            await announce(self.events, operator_id, previous, SessionChange.UPDATED)
            self.summaries.spawn(previous)
        return session_view(NewSession, row, turns=0, active=True, previous_session=previous)

    async def summarise(self, session_id: str) -> None:
        await self.summaries.summarise(session_id)

    async def resume_pending_summaries(self) -> None:
        """At start-up: summaries a crash or restart left undone."""
        await self.summaries.resume_pending()

    async def list_sessions(self, operator_id: int) -> list[ListedSession]:
        await self._settled(operator_id)
        return await self.db.run(list_sessions, operator_id)

    async def get_session(self, operator_id: int, session_id: str) -> Session:
        await self._settled(operator_id)
        running = await self.turn_in_flight(operator_id, session_id)
        found = await self.db.run(get_session, operator_id, session_id)
        return _naming(found, running)

    async def open_session(self, operator_id: int, session_id: str) -> Session:
        """Reopen a session: the next message goes to it; the one left is summarised."""
        await self._settled(operator_id)
        running = await self.turn_in_flight(operator_id, session_id)
        opened, left = await self.db.run(open_session, operator_id, session_id)
        if left is not None:
            self.summaries.spawn(left)
        return _naming(opened, running)

    async def turn_in_flight(self, operator_id: int, session_id: str) -> str | None:
        """The id of the operator's turn still running in this session (here, or on another
        instance when the turn locks are shared), so a client re-attaches only to a live
        turn and never replays a finished one. Another instance's turn is named by its slot
        only: once the slot lapses (that instance was killed mid-turn) the turn is not named,
        and a client re-attaching to it anyway reads its end (bot/chat/frames.py)."""
        running = self.registry.busy(operator_id)
        if running is not None:
            return running.turn_id if running.session_id == session_id else None
        held = await self.locks.holder(operator_id)
        if held is not None and held.session == session_id:
            return held.turn_id or None
        return None

    async def history(self, operator_id: int, *, session_id: str | None, limit: int) -> History:
        await self._settled(operator_id)
        return await self.db.run(history, operator_id, session_id=session_id, limit=limit)

    async def delete_session(self, operator_id: int, session_id: str) -> None:
        """Delete a session; a turn running in it is stopped first (its model call too)."""
        await self._settled(operator_id)
        running = self.registry.busy(operator_id)
        if running is not None and running.session_id == session_id:
            if (await self.registry.stop(operator_id)).state is StopState.FINISHING:
                self._refuse_while_busy(operator_id, "delete its session")
        await self.db.run(delete_session, operator_id, session_id)
        await announce(self.events, operator_id, session_id, SessionChange.DELETED)

    async def clear(self, operator_id: int, *, session_id: str | None) -> Cleared:
        self._refuse_while_busy(operator_id, "clear the conversation")
        cleared = await self.db.run(clear_session, operator_id, session_id=session_id)
        if cleared.session is not None:
            await announce(self.events, operator_id, cleared.session, SessionChange.UPDATED)
        return cleared

    async def stop(self, operator_id: int) -> StopResult:
        """Stop the operator's turn here, or signal the instance that runs it. A turn whose
        model has already answered is finishing: it completes and is kept."""
        result = await self.registry.stop(operator_id)
        handle = result.handle
        if handle is not None:
            stopped = result.state is StopState.STOPPED
            return StopResult(
                stopped=stopped,
                session=handle.session_id or None,
                turn_id=handle.turn_id,
                reason=msgspec.UNSET if stopped else result.state.value,
            )
        held = await self.locks.holder(operator_id)
        if held is None:
            return StopResult(stopped=False)
        await self.locks.signal_stop(operator_id)
        return StopResult(stopped=True, session=held.session_id, turn_id=held.turn_id)


def _naming(session: Session, running: str | None) -> Session:
    """The session read, naming the turn that was running when the read began unless the
    read holds it already. A turn is stored before it lets go of its slot, so a turn read
    as running may be stored by the time the messages are read: named as well, a client
    would show its reply twice (the stored one, and the one it re-attached to). Read the
    other way round (messages first), a turn ending in between would be neither."""
    if running is not None and holds_turn((m.id for m in session.messages), running):
        running = None
    return msgspec.structs.replace(session, turn_in_flight=running)
