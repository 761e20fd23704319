"""Server policy for the trailer's intent: what a turn may do, decided here, not by the model.

Side effects need the operator's own words in this turn's message (`bot/dialogue/phrasing.py`):
an explicit request ("file an issue for ...", "remember that ..."), or a confirmation of the
proposal waiting on the session ("yes", "go ahead", "file it"). Retrieved text, issue bodies
and comments never reach those checks, so they cannot cause a filing however worded.

A question about whether to do something ("should we ...?") is answered: a filing intent
the model attached to it is dropped, never held (`questions_are_answered`).

A proposal (any filing intent the operator did not ask for) stays pending on the session
until it is filed, replaced by a newer one, declined or cleared; a turn that neither
confirms nor replaces it leaves it as it is.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Protocol

from bot.chat.forgotten import ChangedSession
from bot.chat.proposals import Proposal
from bot.chat.session_rows import UNSET
from bot.chat.session_store import TurnSession
from bot.config import AgentConfig
from bot.dialogue.phrasing import (
    ProposalReply,
    asks_whether_to_act,
    confirms_filing,
    operator_asked_to_file,
    operator_asked_to_remember,
    reply_to_proposal,
)
from bot.dialogue.trailer import Intent, Trailer
from bot.filing import FilingKind, FilingService, filing_key

__all__ = [
    "DraftOnlyPolicy",
    "GitHubIntentPolicy",
    "IntentContext",
    "IntentOutcome",
    "IntentPolicy",
    "held",
    "operator_asked_to_file",
    "operator_asked_to_remember",
]


@dataclass
class IntentOutcome:
    intent: Intent
    decision: Any = UNSET  # (body, issue) to store, None to clear, UNSET to keep
    pending: Any = UNSET  # a new Proposal to hold, None to clear the held one, UNSET to keep
    filed: dict[str, Any] = field(default_factory=dict)
    reply_suffix: str = ""
    notes: list[str] = field(default_factory=list)
    # The words a "forget that ..." took out: the turn's own stored messages leave them out
    # too (bot.chat.forgotten.record_without), and so do the turns' frames.
    forgotten: str | None = None
    # The sessions it took them out of: their clients are told to read them again.
    forgotten_in: list[ChangedSession] = field(default_factory=list)


@dataclass(frozen=True)
class IntentContext:
    operator_id: int
    turn_id: str
    message: str
    trailer: Trailer
    session: TurnSession
    agent: AgentConfig


class IntentPolicy(Protocol):
    async def apply(self, ctx: IntentContext) -> IntentOutcome: ...


PENDING_TITLE_LIMIT = 250  # the column holds 300; GitHub titles are shorter in practice


def held(trailer: Trailer, why: str, *, key: str) -> IntentOutcome:
    """A filing the server did not make: held as the session's pending proposal (title,
    body, kind) for the operator's confirmation, whatever the model asked for."""
    kind = FilingKind.MEMORY if trailer.intent is Intent.FILE_MEMORY else FilingKind.WORK
    default = "Remember this" if kind is FilingKind.MEMORY else "Untitled work"
    title = " ".join((trailer.title or default).split())[:PENDING_TITLE_LIMIT]
    proposal = Proposal(title=title, body=trailer.body or "", kind=kind.value, key=key)
    return IntentOutcome(intent=trailer.intent, pending=proposal, notes=[why])


def proposes(trailer: Trailer) -> bool:
    return trailer.intent.files_work or trailer.intent is Intent.FILE_MEMORY


def proposal_key(turn_id: str) -> str:
    """The filing key of a proposal made on `turn_id`."""
    return filing_key("proposal", turn_id)


QUESTION_NOTE = "a question about whether to do something is answered, never a proposal"


def questions_are_answered(ctx: IntentContext) -> IntentOutcome | None:
    """The answer outcome for a filing intent on a message that only asks whether to act
    (no request, no confirmation in it); None when the message asks for a filing."""
    message = ctx.message
    if operator_asked_to_file(message) or operator_asked_to_remember(message):
        return None
    if confirms_filing(message) or reply_to_proposal(message) is ProposalReply.CONFIRM:
        return None
    if not asks_whether_to_act(message):
        return None
    return IntentOutcome(intent=Intent.ANSWER, notes=[QUESTION_NOTE])


def decide_outcome(ctx: IntentContext) -> IntentOutcome:
    """A Decision draft is stored only with a body and a focused issue; never posted here."""
    body = (ctx.trailer.decision_body or "").strip()
    if not body or ctx.session.focus is None:
        return IntentOutcome(
            intent=Intent.DECIDE, notes=["decide without a body or focus: no draft"]
        )
    return IntentOutcome(intent=Intent.DECIDE, decision=(body, ctx.session.focus))


class DraftOnlyPolicy:
    """Policy when no GitHub App is wired: decisions are drafted, filings are held pending."""

    async def apply(self, ctx: IntentContext) -> IntentOutcome:
        trailer = ctx.trailer
        if trailer.intent is Intent.DECIDE:
            return decide_outcome(ctx)
        if proposes(trailer) and (answered := questions_are_answered(ctx)) is not None:
            return answered
        if proposes(trailer):
            why = "no GitHub App configured: nothing was filed"
            return held(trailer, why, key=proposal_key(ctx.turn_id))
        outcome = IntentOutcome(intent=trailer.intent)
        if ctx.session.pending is not None:
            answer = reply_to_proposal(ctx.message)
            if answer is ProposalReply.CONFIRM:
                outcome.notes.append("no GitHub App configured: the proposal stays pending")
            elif answer is ProposalReply.DECLINE:
                outcome.pending = None
                outcome.notes.append("the operator declined the pending proposal: dropped")
        return outcome


class GitHubIntentPolicy:
    """Policy with the GitHub App wired: filings happen, but only on the operator's word.

    First the pending proposal: a confirmation files it (its own key, so a `y` pressed as
    well files nothing more), a decline drops it. Then the trailer: a filing intent files on
    this turn when the message asks for it ("file an issue for ...", "remember that ...",
    or "yes, file it" when nothing is pending); otherwise it is held as the new proposal.
    """

    def __init__(self, filing: FilingService) -> None:
        self.filing = filing

    async def apply(self, ctx: IntentContext) -> IntentOutcome:
        pending = ctx.session.pending
        answer = reply_to_proposal(ctx.message) if pending is not None else None
        if pending is not None and answer is ProposalReply.CONFIRM:
            return await self.file_proposal(ctx, pending)
        outcome = await self._trailer(ctx, nothing_pending=pending is None)
        if answer is ProposalReply.DECLINE and outcome.pending is UNSET:
            outcome.pending = None
            outcome.notes.append("the operator declined the pending proposal: dropped")
        return outcome

    async def _trailer(self, ctx: IntentContext, *, nothing_pending: bool) -> IntentOutcome:
        trailer = ctx.trailer
        if trailer.intent is Intent.DECIDE:
            return decide_outcome(ctx)
        if not proposes(trailer):
            return IntentOutcome(intent=trailer.intent)
        if (answered := questions_are_answered(ctx)) is not None:
            return answered
        said_so = nothing_pending and confirms_filing(ctx.message)
        if trailer.intent is Intent.FILE_MEMORY:
            if said_so or operator_asked_to_remember(ctx.message):
                return await self._file(ctx, FilingKind.MEMORY)
            why = "the operator did not ask to remember anything: held for confirmation"
        else:
            if said_so or operator_asked_to_file(ctx.message):
                return await self._file(ctx, FilingKind.WORK)
            why = "proposed work is filed only when the operator asks or confirms"
        return held(trailer, why, key=proposal_key(ctx.turn_id))

    async def file_proposal(self, ctx: IntentContext, proposal: Proposal) -> IntentOutcome:
        """The operator confirmed the pending proposal in words: file it, clear it."""
        kind = FilingKind(proposal.kind)
        filed = await self.filing.file(
            key=proposal.key,
            repo=ctx.agent.repo,
            title=proposal.title,
            body=proposal.body or proposal.title,
            kind=kind,
            origin_session=ctx.session.id,
        )
        intent = Intent.FILE_MEMORY if kind is FilingKind.MEMORY else Intent.FILE_WORK
        return IntentOutcome(
            intent=intent,
            pending=None,
            filed={"number": filed.number, "url": filed.url, "task_started": filed.task_started},
            reply_suffix=f"\n\nFiled as #{filed.number}: {filed.url}",
            notes=["the operator confirmed the pending proposal"],
        )

    async def _file(self, ctx: IntentContext, kind: FilingKind) -> IntentOutcome:
        title = ctx.trailer.title or ctx.message.strip().splitlines()[0][:120]
        filed = await self.filing.file(
            key=filing_key("turn", ctx.turn_id),
            repo=ctx.agent.repo,
            title=title,
            body=ctx.trailer.body or ctx.message,
            kind=kind,
            origin_session=ctx.session.id,
        )
        return IntentOutcome(
            intent=ctx.trailer.intent,
            filed={"number": filed.number, "url": filed.url, "task_started": filed.task_started},
            reply_suffix=f"\n\nFiled as #{filed.number}: {filed.url}",
        )
