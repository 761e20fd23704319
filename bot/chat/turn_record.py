"""A finished turn as it is written (`TurnRecord`: both messages and the session updates,
bot.chat.session_store.persist_turn), and the same record without the words a
`forget that <words>` named (bot.chat.forgotten)."""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

from bot.chat.forget_words import Words
from bot.chat.proposals import Proposal
from bot.chat.session_rows import UNSET
from bot.contracts.turn_meta import TurnMeta
from bot.dialogue.titles import title_from_message


@dataclass(frozen=True)
class TurnRecord:
    """A finished turn, ready to be written: both messages and the session updates."""

    turn_id: str
    user_message: str
    reply: str
    reasoning: str
    intent: str
    meta: TurnMeta
    title: str | None = None
    decision: tuple[str, int] | Any | None = UNSET
    pending: Proposal | Any | None = UNSET  # a new proposal, None to clear, UNSET to keep

    def without(self, words: Words) -> TurnRecord:
        """The record without the words (the operator's message, the reply, its reasoning
        and notes, the drafts), its title made from what is left of the message."""
        message = words.out_of(self.user_message)
        return replace(
            self,
            user_message=message,
            reply=words.out_of(self.reply),
            reasoning=words.out_of(self.reasoning),
            meta=words.out_of(self.meta),
            title=title_from_message(message) if self.title is not None else None,
            decision=_decision_without(self.decision, words),
            pending=_pending_without(self.pending, words),
        )


def _decision_without(decision: Any, words: Words) -> Any:
    if isinstance(decision, tuple):
        body, issue = decision
        return (words.out_of(body), issue)
    return decision


def _pending_without(pending: Any, words: Words) -> Any:
    if isinstance(pending, Proposal):
        return replace(pending, title=words.out_of(pending.title), body=words.out_of(pending.body))
    return pending
