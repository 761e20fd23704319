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

_ASK_TO_FILE = re.compile(
    r"\b(?:file|open|create|raise|log)\s+(?:an?\s+|the\s+|this\s+|that\s+)?(?:new\s+|github\s+)?"
    r"(?:issue|ticket|task|work|bug)\b",
    re.IGNORECASE,
)
_ASK_TO_REMEMBER = re.compile(r"\bremember\b|\bfile\s+(?:a\s+)?memory\b", re.IGNORECASE)


def operator_asked_to_file(message: str) -> bool:
    return bool(_ASK_TO_FILE.search(message))


def operator_asked_to_remember(message: str) -> bool:
    return bool(_ASK_TO_REMEMBER.search(message))


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
            title = trailer.title or "Untitled work"
            return IntentOutcome(
                intent=trailer.intent,
                pending=(title, trailer.body or ""),
                notes=["no GitHub App configured: nothing was filed"],
            )
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
                return _held(ctx, "the operator did not ask to remember anything")
            return await self._file(ctx, FilingKind.MEMORY)
        if trailer.intent.files_work:
            if trailer.intent is Intent.PROPOSE_WORK or not operator_asked_to_file(ctx.message):
                return _held(ctx, "proposed work is filed only when the operator confirms")
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


def _held(ctx: IntentContext, why: str) -> IntentOutcome:
    title = ctx.trailer.title or "Untitled work"
    return IntentOutcome(
        intent=ctx.trailer.intent, pending=(title, ctx.trailer.body or ""), notes=[why]
    )
