"""A turn's intent applied (filing, publishing, the operator's commands: bot.chat.intents),
a failure said in the reply rather than failing the turn."""

from __future__ import annotations

import logging

from bot.chat.inflight import TurnHandle
from bot.chat.intents import (
    IntentContext,
    IntentOutcome,
    IntentPolicy,
    held,
    proposal_key,
    proposes,
)
from bot.chat.progress import progress_while
from bot.chat.session_store import TurnSession
from bot.chat.turn_request import TurnRequest
from bot.config import AgentConfig
from bot.dialogue.trailer import Trailer

log = logging.getLogger(__name__)


async def apply_intent(
    policy: IntentPolicy,
    request: TurnRequest,
    handle: TurnHandle,
    ts: TurnSession,
    agent: AgentConfig,
    trailer: Trailer,
) -> IntentOutcome:
    """The intent the draft's trailer names, applied by `policy`; one that fails is said in
    the reply ("Not done: ...") and changes nothing else (a proposal it confirmed stays held,
    one it made is held again, so the operator can confirm it once GitHub answers)."""
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
            return await policy.apply(context)
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
