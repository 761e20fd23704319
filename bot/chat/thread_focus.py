"""What a question in a Discuss session asks of the focused thread (docs/memory.md, Focus).

The focused issue's thread is all given; the question says which part of it answers: a
worker's attempt is in the worker sessions, a fix is the pull request, the operator's answer
is the Decision, the state of things is the thread's latest event. Those chunks come in as
focus context ahead of the rest, and the issue's own question and its latest Decision are
always in view, whatever is asked.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from enum import StrEnum

from bot.chat.ordering import asks_state
from memory.segment import Record


class Asked(StrEnum):
    WORKER = "worker"  # what a worker tried, asked, ran
    FIX = "fix"  # the pull request
    DECISION = "decision"  # the operator's answer
    STATUS = "status"  # the latest event


_ASKS = (
    (Asked.WORKER, re.compile(r"\b(?:worker|attempts?|tried|try|trying|agent|run|ran)\b", re.I)),
    (
        Asked.FIX,
        re.compile(r"\b(?:fix|fixed|fixes|pull\s+request|pr|merged?|patch(?:ed)?)\b", re.I),
    ),
    (
        Asked.DECISION,
        re.compile(r"\b(?:decide[ds]?|decision|operator|agreed|chose|chosen|ruled)\b", re.I),
    ),
    (
        Asked.STATUS,
        re.compile(r"\b(?:stand|stands|status|latest|progress|where\s+are\s+we|now)\b", re.I),
    ),
)
_FIRST = re.compile(r"\b(?:first|initially|originally|earliest|at\s+first)\b", re.I)
# A Decision as memory keeps it: the published comment (its marker, when kept) or a comment
# whose text opens with "Decision" (bot/decisions.py publishes the operator's words).
_DECISION = re.compile(
    r"<!--\s*steelframe-decision\s*-->|^(?:@\S+ on #\d+:\n)?\s*\**decision\b", re.I
)
WORKER_SESSIONS = 2  # worker sessions brought in for a question about the worker


def asked_for(question: str) -> set[Asked]:
    """What the question asks of the thread (possibly several things, possibly nothing)."""
    asked = {kind for kind, pattern in _ASKS if pattern.search(question)}
    if asks_state(question):
        asked.add(Asked.STATUS)
    return asked


def is_decision(record: Record) -> bool:
    return record.source == "comment" and bool(_DECISION.search(record.text))


def latest_decision(thread: Sequence[Record]) -> Record | None:
    decisions = [r for r in thread if is_decision(r)]
    return max(decisions, key=lambda r: r.id) if decisions else None


def answering(question: str, thread: Sequence[Record]) -> list[Record]:
    """The chunks of the focused thread (oldest first) that answer what the question asks,
    most specific first: the worker's sessions (the first one when it asks what was tried
    first), the pull requests, the latest Decision, the latest event."""
    asked = asked_for(question)
    picked: list[Record] = []
    if Asked.WORKER in asked:
        sessions = [r for r in thread if r.source == "worker_session"]
        if _FIRST.search(question):
            picked.extend(sessions[:1])
        else:
            picked.extend(sessions[-WORKER_SESSIONS:][::-1])
    if Asked.FIX in asked:
        picked.extend(r for r in thread if r.source == "pull_request")
    if Asked.DECISION in asked and (decision := latest_decision(thread)) is not None:
        picked.append(decision)
    if Asked.STATUS in asked and thread:
        picked.append(max(thread, key=lambda r: r.id))
    return list({r.id: r for r in picked}.values())  # in order, each once
