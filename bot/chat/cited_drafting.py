"""A turn's context and its draft, held to the citation check (DESIGN.md, one chat turn):
retrieval and the focused issue gathered (neither ever fails the turn), then a draft; a draft
that cites none of the hits kept is drafted again on a widened retrieval, once. The model
failing or running out of time ends the turn with an error frame (and a warning in the log).
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import replace

from bot.chat.drafting import Drafting, draft_once
from bot.chat.grounding import Grounder, Grounding
from bot.chat.issue_context import IssueContextLoader
from bot.chat.operator_commands import answered_by_record
from bot.chat.session_store import TurnSession
from bot.chat.turn import Draft, TurnContext, clean_grounding
from bot.config import AgentConfig, Settings
from bot.contracts.chat import DeltaFrame, Emit, ErrorFrame, ErrorReason, StatusFrame
from bot.runtimes.base import RuntimeError_

log = logging.getLogger(__name__)
# Turns retrieving at once. Retrieval is CPU work on the thread pool; 1,000 turns starting
# within a second queued 1,000 jobs there, ahead of the reads that new requests need before
# their first frame (auth, the session). More than a few at once gains nothing under the GIL.
GROUNDING_AT_ONCE = 4
REDRAFT_HINT = (
    "Your previous draft cited none of the retrieved context. Answer again, citing the hits "
    "(#issue, session id or their distinctive words) where they are relevant."
)


class CitedDrafting:
    """Gathers a turn's context and drafts its reply, citing what was retrieved."""

    def __init__(
        self, *, grounder: Grounder, issues: IssueContextLoader | None, settings: Settings
    ) -> None:
        self.grounder = grounder
        self.issues = issues
        self.settings = settings
        self._grounding = asyncio.Semaphore(GROUNDING_AT_ONCE)

    async def gather(
        self, message: str, agent: AgentConfig, ts: TurnSession, emit: Emit
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
            await emit(StatusFrame(text=f"issue #{ts.focus} unavailable"))
            return TurnContext(grounding, issue_error=str(reason)[:200])
        await emit(StatusFrame(text=f"issue #{ts.focus} · {len(issue.comments)} comments"))
        return TurnContext(grounding, issue=issue)

    async def draft_cited(
        self, drafting: Drafting, context: TurnContext
    ) -> tuple[Draft, TurnContext] | None:
        """Draft; if hits were kept and the draft cites none, widen once and draft again.
        None when the turn failed (its error frame is sent)."""
        emit, agent, focus = drafting.emit, drafting.agent, drafting.session.focus
        try:
            async with asyncio.timeout(self.settings.turn_timeout_seconds):
                draft = await draft_once(drafting, context, number=1)
                grounding = context.grounding
                if (
                    grounding.kept_hits
                    and not answered_by_record(drafting.message)  # memory is no part of it
                    and not self.grounder.cites(draft.reply, grounding)
                ):
                    await emit(StatusFrame(text="no citation · widening retrieval"))
                    message = drafting.message
                    widened = await self._widen(message, agent, focus, grounding, emit)
                    context = replace(context, grounding=clean_grounding(widened))
                    draft = await self._redraft(drafting, context, first=draft)
        except RuntimeError_ as exc:
            # The operator sees it in the turn; the log is where whoever runs the service
            # sees the model failing (the message is safe to show: no keys, no traces).
            log.warning(
                "turn in session %s: the model failed: %s", drafting.session.id, exc.message
            )
            await emit(ErrorFrame(error=exc.message, reason=ErrorReason.RUNTIME))
            return None
        except TimeoutError:
            log.warning(
                "turn in session %s: the model did not finish within %s s",
                drafting.session.id,
                self.settings.turn_timeout_seconds,
            )
            await emit(
                ErrorFrame(error="the model did not finish in time", reason=ErrorReason.TIMEOUT)
            )
            return None
        return draft, context

    async def _redraft(self, drafting: Drafting, context: TurnContext, *, first: Draft) -> Draft:
        """The grounded second draft; if it fails, the first draft stands (shown again)."""
        emit = drafting.emit
        try:
            second = await draft_once(drafting, context, number=2, hint=REDRAFT_HINT)
        except RuntimeError_ as exc:
            log.warning("re-draft failed, keeping the first draft: %s", exc.message)
            await emit(StatusFrame(text="re-draft failed · keeping the first draft"))
            await emit(DeltaFrame(text=first.reply, draft=1, replace=True))
            return first
        # Both drafts were paid for.
        second.usage["input_tokens"] += first.usage["input_tokens"]
        second.usage["output_tokens"] += first.usage["output_tokens"]
        second.redrafted = True
        return second

    async def _ground(
        self, query: str, agent: AgentConfig, focus: int | None, emit: Emit
    ) -> Grounding:
        try:
            async with self._grounding:
                return await self.grounder.ground(query=query, agent=agent, focus=focus, emit=emit)
        except Exception as exc:  # retrieval never fails the turn (spec: Retrieve grounding)
            log.warning("retrieval unavailable: %s", type(exc).__name__)
            await emit(StatusFrame(text="retrieve unavailable"))
            return Grounding(
                available=False,
                prompt_block="Prior Steelframe context: (retrieval unavailable)",
                meta={"error": type(exc).__name__},
            )

    async def _widen(
        self, query: str, agent: AgentConfig, focus: int | None, previous: Grounding, emit: Emit
    ) -> Grounding:
        try:
            return await self.grounder.widen(
                query=query, agent=agent, focus=focus, previous=previous, emit=emit
            )
        except Exception as exc:
            log.warning("widening retrieval failed: %s", type(exc).__name__)
            return previous
