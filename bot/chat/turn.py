"""The values one chat turn passes between its steps, and the shapes it stores and answers.

`TurnPipeline` (bot.chat.pipeline) runs the steps (gather context, draft with the citation
check, apply the intent, persist, answer); this module says what each step hands on: the
context the model is given, a draft, and the finished turn the metadata and the ChatResponse
are made from.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

import msgspec

from bot.chat.blocks import context_block, fallback_block
from bot.chat.grounding import Grounding, Verdict
from bot.chat.intents import IntentOutcome
from bot.chat.issue_context import IssueContext
from bot.chat.proposals import Proposal
from bot.chat.session_rows import REASONING_CAP, UNSET
from bot.chat.session_store import TurnSession
from bot.chat.turn_record import TurnRecord
from bot.contracts.chat import ChatResponse, MemoryVerdict, Message
from bot.contracts.hits import hits_json
from bot.contracts.turn_meta import RetrievalMeta, TurnMeta, UsageMeta
from bot.dialogue.titles import title_from_message
from bot.dialogue.trailer import Intent, Trailer
from bot.markers import is_status_comment, without_markers
from bot.runtimes.base import ContextBudget, Route

# A turn the service cut (a restart, a deploy, a shutdown) before the model answered leaves
# the operator's message in its session, answered by this: the session says the turn did not
# complete (bot.chat.inflight cuts it; nothing of the turn was applied).
CUT_REPLY = (
    "(This turn did not complete: the service stopped, for a restart or a shutdown, before "
    "the answer was ready. Nothing was done for it; send the message again.)"
)
# A turn whose instance went away mid-turn (killed: SIGKILL, an OOM kill, a crash) is
# recorded by the reader that ended it (bot.chat.frames), in these words: that reader cannot
# know how far the turn had gone (it may have begun filing or publishing), only that its
# answer was never saved.
OWNER_GONE_REPLY = (
    "(This turn did not complete: the instance of the service running it went away, a crash "
    "or a kill, before the turn finished. Its answer was not saved; send the message again.)"
)
CUT_KIND = "turn_cut"  # the stored reply's meta `kind`, either way

MEMORY_VERDICTS: dict[Verdict, MemoryVerdict] = {
    Verdict.ANSWERS: "answers",
    Verdict.NOTHING: "nothing",
    Verdict.UNAVAILABLE: "unavailable",
}


def clean_grounding(grounding: Grounding) -> Grounding:
    """Steelframe's own text out of the hits: its status comments (indexed before they were
    kept out of memory) are dropped, its markers removed from what stays."""
    hits = [
        msgspec.structs.replace(
            hit, text=without_markers(hit.text), preview=without_markers(hit.preview)
        )
        for hit in grounding.hits
        if not is_status_comment(hit.text)
    ]
    if hits == grounding.hits:
        return grounding
    block = fallback_block(hits) if grounding.recency_fallback else context_block(hits)
    if not hits and not grounding.recency_fallback:
        block = fallback_block([])
    dropped = len(grounding.hits) - len(hits)
    meta: RetrievalMeta = {**grounding.meta, "own_text_dropped": dropped}
    return replace(grounding, hits=hits, prompt_block=block, meta=meta)


@dataclass(frozen=True)
class TurnContext:
    """What the model is given besides the conversation: retrieval and the focused issue."""

    grounding: Grounding
    issue: IssueContext | None = None
    issue_error: str | None = None

    @property
    def issue_block(self) -> str:
        if self.issue is not None:
            return self.issue.prompt_block()
        if self.issue_error:
            return (
                f"(the focused issue could not be read from GitHub this turn: {self.issue_error})"
            )
        return ""


def cut_record(
    turn_id: str, message: str, session: TurnSession, *, reply: str = CUT_REPLY
) -> TurnRecord:
    """What a cut turn stores: the operator's message, and `reply` (CUT_REPLY, or
    OWNER_GONE_REPLY) in place of an answer (an `answer` that changes nothing of the
    session: no decision, no proposal)."""
    return TurnRecord(
        turn_id=turn_id,
        user_message=message,
        reply=reply,
        reasoning="",
        intent=Intent.ANSWER.value,
        meta={"kind": CUT_KIND, "agent": session.agent, "focus": session.focus},
        title=title_from_message(message) if session.title is None else None,
    )


@dataclass
class Draft:
    reply: str
    trailer: Trailer
    reasoning: str
    usage: UsageMeta = field(default_factory=lambda: UsageMeta(input_tokens=0, output_tokens=0))
    route: Route | None = None
    budget: ContextBudget | None = None
    first_frame_ms: float | None = None
    redrafted: bool = False


@dataclass(frozen=True)
class FinishedTurn:
    """Everything the stored metadata and the ChatResponse are made from."""

    session: TurnSession
    turn_id: str
    draft: Draft
    outcome: IntentOutcome
    context: TurnContext
    model: str
    endpoint: str
    requested_model: str
    cost_usd: float | None
    total_ms: float

    @property
    def reply(self) -> str:
        return without_markers(self.draft.reply) + self.outcome.reply_suffix

    @property
    def pending(self) -> Proposal | None:
        if self.outcome.pending is UNSET:
            return self.session.pending
        pending = self.outcome.pending
        return pending if isinstance(pending, Proposal) else None

    @property
    def decision(self) -> tuple[str, int] | None:
        decision = self.outcome.decision
        if decision is not UNSET:
            return decision if isinstance(decision, tuple) else None
        ts = self.session
        return (
            (ts.decision_body, ts.decision_issue)
            if ts.decision_body and ts.decision_issue
            else None
        )

    def meta(self) -> TurnMeta:
        grounding = self.context.grounding
        return {
            "model": self.model,
            "endpoint": self.endpoint,
            "requested_model": self.requested_model,
            "usage": self.draft.usage,
            "cost_usd": self.cost_usd,
            "context": self.draft.budget.as_meta() if self.draft.budget else None,
            "timings": {"first_frame_ms": self.draft.first_frame_ms, "total_ms": self.total_ms},
            "retrieval": {
                "available": grounding.available,
                "recency_fallback": grounding.recency_fallback,
                **grounding.meta,
            },
            "retrieve_hits": len(grounding.kept_hits),
            "retrieved": hits_json(grounding.hits),
            "memory_verdict": grounding.verdict.value,
            "answerability": grounding.answerability.to_json(),
            "issue": self.context.issue.facts() if self.context.issue else None,
            "issue_error": self.context.issue_error,
            "redrafted": self.draft.redrafted,
            "trailer_malformed": self.draft.trailer.malformed,
            "focus": self.session.focus,
            "agent": self.session.agent,
            "filed": self.outcome.filed,
            "notes": self.outcome.notes,
            "pending": self.pending.as_json() if self.pending else None,
        }

    def response(self, history: list[Message]) -> ChatResponse:
        """The ChatResponse (docs/api.md)."""
        grounding, pending, decision = self.context.grounding, self.pending, self.decision
        filed = self.outcome.filed
        return ChatResponse(
            reply=self.reply,
            intent=self.outcome.intent.value,
            session=self.session.id,
            turn_id=self.turn_id,
            agent=self.session.agent,
            focus=self.session.focus,
            history=history,
            retrieve_hits=len(grounding.kept_hits),
            retrieved=list(grounding.hits),
            retrieval_available=grounding.available,
            memory_verdict=MEMORY_VERDICTS[grounding.verdict],
            reasoning=self.draft.reasoning[:REASONING_CAP],
            model=self.model,
            usage=self.draft.usage,
            decision_body=decision[0] if decision else None,
            decision_issue=decision[1] if decision else None,
            pending_title=pending.title if pending else None,
            pending_body=pending.body if pending else None,
            pending_kind=pending.kind if pending else None,
            filed_issue_number=filed.get("number"),
            filed_issue_url=filed.get("url"),
            filed_task_started=bool(filed.get("task_started", False)),
            notes=self.outcome.notes,
        )
