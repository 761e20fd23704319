"""One draft of a turn's reply: the request the model is sent, and its events streamed out
as frames while the draft (reply, trailer, reasoning, usage, route, budget) is kept."""

from __future__ import annotations

import time
from dataclasses import dataclass

from bot.chat.grounding import Verdict
from bot.chat.operator_commands import answered_by_record
from bot.chat.prompt import messages, system_prompt
from bot.chat.session_store import TurnSession
from bot.chat.turn import Draft, TurnContext
from bot.config import AgentConfig
from bot.contracts.chat import DeltaFrame, Emit, StatusFrame, ThinkingFrame
from bot.dialogue.trailer import Trailer, TrailerFilter, split_reply
from bot.runtimes.base import (
    ContextBudget,
    Delta,
    Route,
    Runtime,
    RuntimeEvent,
    RuntimeRequest,
    Status,
    Thinking,
    TurnFacts,
    Usage,
    closing_stream,
)


@dataclass(frozen=True)
class Drafting:
    """Who drafts a turn's reply, for whom and where its frames go: what every draft of one
    turn shares (the context it drafts from may widen between drafts)."""

    runtime: Runtime
    message: str
    session: TurnSession
    agent: AgentConfig
    emit: Emit


async def draft_once(
    drafting: Drafting, context: TurnContext, *, number: int, hint: str | None = None
) -> Draft:
    """One draft streamed: thinking and visible reply tokens go out as frames (the trailer
    held back), usage, route and budget are kept."""
    request = runtime_request(drafting, context, hint)
    streamed = DraftStream(drafting.emit, number)
    if number > 1:
        # Clients drop what they showed of the earlier draft now, even if this one turns
        # out to stream no visible text.
        await drafting.emit(DeltaFrame(text="", draft=number, replace=True))
    # Closed as soon as the turn ends, a stop landing between two events included, so the
    # model call (its HTTP stream) ends with it rather than when it is collected.
    async with closing_stream(drafting.runtime.stream(request)) as events:
        async for event in events:
            await streamed.take(event)
    return await streamed.finish()


class DraftStream:
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
                await self.emit(DeltaFrame(text=text, draft=self.number))
        elif isinstance(event, Thinking):
            self.reasoning.append(event.text)
            await self.emit(ThinkingFrame(text=event.text, draft=self.number))
        elif isinstance(event, Usage):
            draft.usage["input_tokens"] += event.input_tokens
            draft.usage["output_tokens"] += event.output_tokens
        elif isinstance(event, Route):
            draft.route = event
        elif isinstance(event, ContextBudget):
            draft.budget = event
        elif isinstance(event, Status):
            await self.emit(StatusFrame(text=event.text))

    async def finish(self) -> Draft:
        """The held-back tail out, the reply split from its trailer."""
        tail = self.visible.flush()
        if tail.strip():
            await self.emit(DeltaFrame(text=tail, draft=self.number))
        self.draft.reply, self.draft.trailer = split_reply(self.visible.text)
        self.draft.reasoning = "".join(self.reasoning)
        return self.draft


def runtime_request(drafting: Drafting, context: TurnContext, hint: str | None) -> RuntimeRequest:
    """What the model is sent for one draft: the system prompt, the conversation, the facts."""
    grounding, ts, agent = context.grounding, drafting.session, drafting.agent
    by_record = answered_by_record(drafting.message)
    facts = TurnFacts(
        message=drafting.message,
        focus=ts.focus,
        hits=grounding.hits,
        recency_fallback=grounding.recency_fallback,
        committed_memory=grounding.committed_memory,
        task=grounding.task,
        retrieval_available=grounding.available,
        redraft_hint=hint,
        memory_answers=grounding.verdict is not Verdict.NOTHING,
        answered_by_record=by_record,
    )
    system = system_prompt(
        agent=agent,
        focus=ts.focus,
        grounding=grounding,
        issue_block=context.issue_block,
        redraft_hint=hint,
        answered_by_record=by_record,
    )
    return RuntimeRequest(
        system=system,
        messages=messages(ts.history, drafting.message),
        facts=facts,
        checkout=agent.checkout,
    )
