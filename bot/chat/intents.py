"""Server policy for the trailer's intent: what a turn may do, decided here, not by the model.

Side effects need the operator's own explicit request in this turn's message. Retrieved
text, issue bodies and comments never reach `operator_asked_to_file`, so they cannot cause
a filing however they are worded.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any, Protocol

from bot.chat.sessions import UNSET, TurnSession
from bot.chat.trailer import Intent, Trailer
from bot.config import AgentConfig
from bot.filing import FilingKind, FilingService, filing_key

# An explicit request is an imperative at the start of a sentence ("file an issue for ...",
# "please open a ticket ...", "can you create a new issue ..."), for a NEW issue. Questions
# ("why did nobody create a ticket?"), negations ("don't file an issue"), and references to
# an existing one ("open the issue about login") are not requests; when in doubt the
# proposal is held for the operator's explicit `y`.
_LEAD = (
    r"^(?:(?:please|pls|ok|okay|so|and|then|now|also)[\s,]+)*"
    r"(?:(?:can|could|would|will)\s+you\s+(?:please\s+)?)?"
)
_ASK_TO_FILE = re.compile(
    _LEAD + r"(?:file|open|create|raise|log|make)\s+(?:me\s+)?"
    r"(?:(?:an?|one|another)\s+(?:new\s+)?|new\s+)(?:github\s+)?(?:issue|ticket|task|bug)\b"
    r"|" + _LEAD + r"file\s+(?:the\s+)?work\b",
    re.IGNORECASE,
)
_ASK_TO_REMEMBER = re.compile(
    _LEAD + r"(?:remember|memorize|note|keep\s+in\s+mind)(?:\s+that\b|\s*:)"
    r"|" + _LEAD + r"file\s+(?:a\s+)?memory\b",
    re.IGNORECASE,
)
_CLAUSES = re.compile(r"(?<=[.!?;])\s+|\n+")


def _clauses(message: str) -> list[str]:
    return [part.strip(" \t\"'*>-") for part in _CLAUSES.split(message) if part.strip()]


def operator_asked_to_file(message: str) -> bool:
    return any(_ASK_TO_FILE.match(clause) for clause in _clauses(message))


def operator_asked_to_remember(message: str) -> bool:
    return any(_ASK_TO_REMEMBER.match(clause) for clause in _clauses(message))


@dataclass
class IntentOutcome:
    intent: Intent
    decision: Any = UNSET  # (body, issue) to store, None to clear, UNSET to keep
    pending: Any = None  # (title, body) proposed but not filed; None clears the last one
    filed: dict[str, Any] = field(default_factory=dict)
    reply_suffix: str = ""
    notes: list[str] = field(default_factory=list)


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


def held(trailer: Trailer, why: str) -> IntentOutcome:
    """A filing the server did not make: kept as the session's pending proposal (title,
    body, kind) for the operator's explicit `y`, whatever the model asked for."""
    kind = FilingKind.MEMORY if trailer.intent is Intent.FILE_MEMORY else FilingKind.WORK
    default = "Remember this" if kind is FilingKind.MEMORY else "Untitled work"
    title = " ".join((trailer.title or default).split())[:PENDING_TITLE_LIMIT]
    return IntentOutcome(
        intent=trailer.intent, pending=(title, trailer.body or "", kind.value), notes=[why]
    )


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
        if trailer.intent.files_work or trailer.intent is Intent.FILE_MEMORY:
            return held(trailer, "no GitHub App configured: nothing was filed")
        return IntentOutcome(intent=trailer.intent)


class GitHubIntentPolicy:
    """Policy with the GitHub App wired: filings happen, but only on the operator's request.

    `file_work`/`open_issue`/`create_issue` file when this turn's message asks for it;
    `propose_work`, or any filing intent the operator did not ask for, is held as
    `pending_title` for an explicit `y`. `file_memory` files a `steelframe:memory` issue when
    the operator asked Chat to remember something. The filing key is the turn id, so a
    retried turn never files twice.
    """

    def __init__(self, filing: FilingService) -> None:
        self.filing = filing

    async def apply(self, ctx: IntentContext) -> IntentOutcome:
        trailer = ctx.trailer
        if trailer.intent is Intent.DECIDE:
            return decide_outcome(ctx)
        if trailer.intent is Intent.FILE_MEMORY:
            if not operator_asked_to_remember(ctx.message):
                return held(trailer, "the operator did not ask to remember anything")
            return await self._file(ctx, FilingKind.MEMORY)
        if trailer.intent.files_work:
            if trailer.intent is Intent.PROPOSE_WORK or not operator_asked_to_file(ctx.message):
                return held(trailer, "proposed work is filed only when the operator confirms")
            return await self._file(ctx, FilingKind.WORK)
        return IntentOutcome(intent=trailer.intent)

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
