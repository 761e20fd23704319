"""The offline runtime: no model, no network; deterministic and honest.

It answers from the facts the turn was given (retrieved hits, committed memory, the focus,
task state), says plainly that no model is configured, and writes a STEELFRAME_META trailer
like a model would. Intents come only from the operator's own message, recognised by the
same grammar the server's intent policy reads (bot/dialogue/phrasing.py), never from retrieved
or GitHub text; a question is answered, never turned into a proposal.
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import AsyncIterator

from bot.contracts.hits import RetrievedHit, Strength
from bot.dialogue import NOTHING_ANSWERS
from bot.dialogue.phrasing import filing_request, memory_request
from bot.dialogue.titles import issue_title
from bot.dialogue.trailer import Intent, Trailer, render_trailer
from bot.runtimes.base import Delta, Route, RuntimeEvent, RuntimeRequest, Thinking, Usage

_DECIDE = re.compile(
    r"^\s*(?:please\s+)?(?:draft|write|make)\s+(?:a\s+|the\s+)?decision"
    r"(?:\s*(?:for|on|about|that|:))?\s*(?P<what>.*)$",
    re.IGNORECASE | re.DOTALL,
)
# A request that names no subject of its own ("file an issue for it", "remember this"):
# the title comes from the whole message instead.
_PRONOUNS = frozenset({"", "it", "this", "that", "them", "one"})
NO_MODEL_NOTE = (
    "No model is configured (offline runtime), "
    "so this answer is assembled from what this turn was given."
)


class OfflineRuntime:
    name = "offline"
    model = "offline"

    def __init__(self, *, token_delay: float = 0.0) -> None:
        self._token_delay = token_delay

    async def stream(self, request: RuntimeRequest) -> AsyncIterator[RuntimeEvent]:
        yield Route(model=self.model, endpoint="offline")
        facts = request.facts
        yield Thinking(f"Looking at {len(facts.hits)} retrieved hit(s)")
        yield Thinking(f" and {len(facts.committed_memory)} committed memory file(s).")
        reply, trailer = compose(request)
        text = f"{reply}\n\n{render_trailer(trailer)}"
        for piece in re.findall(r"\S+\s*|\s+", text):
            if self._token_delay:
                await asyncio.sleep(self._token_delay)
            yield Delta(piece)
        yield Usage(
            input_tokens=_words(request.system) + _words(facts.message), output_tokens=_words(reply)
        )


def compose(request: RuntimeRequest) -> tuple[str, Trailer]:
    """The offline reply and its trailer, from the request's facts alone."""
    facts = request.facts
    message = facts.message.strip()
    lines: list[str] = []
    trailer = Trailer()

    if (work := filing_request(message)) is not None:
        title = _title(work if work.lower() not in _PRONOUNS else message)
        lines.append(f"Filing an issue: **{title}**.")
        trailer = Trailer(intent=Intent.FILE_WORK, title=title, body=_body(message, facts.focus))
    elif (fact := memory_request(message)) is not None:
        fact = fact if fact.lower() not in _PRONOUNS else message
        title = _title(f"Remember: {fact}")
        lines.append(f"I will file this as committed memory: {fact}")
        trailer = Trailer(intent=Intent.FILE_MEMORY, title=title, body=fact)
    elif (match := _DECIDE.match(message)) and facts.focus is not None:
        decision = match.group("what").strip() or "Proceed as discussed in this session."
        lines.append(
            f"Here is a Decision draft for #{facts.focus}. Nothing is posted until you publish it."
        )
        trailer = Trailer(intent=Intent.DECIDE, decision_body=decision)
    elif _DECIDE.match(message):
        lines.append(
            "A Decision needs a focused issue: start a Discuss session on the issue first."
        )

    lines.append(NO_MODEL_NOTE)
    if facts.focus is not None:
        lines.append(f"This session is focused on #{facts.focus}.")
    if facts.task is not None:
        lines.append(f"Task for #{facts.focus}: state `{facts.task.state}`.")
    if facts.answered_by_record:
        return "\n".join(lines), trailer  # the record's answer follows this draft
    for memory in facts.committed_memory[:3]:
        lines.append(f"Committed memory `{memory.path}`: {_preview(memory.text)}")
    if not facts.retrieval_available:
        lines.append("Session memory was unavailable for this turn.")
    elif facts.hits and not facts.recency_fallback and not facts.memory_answers:
        lines.append("Closest in session memory, not an answer:")
        for hit in facts.hits[:3]:
            lines.append(f"- {_cite(hit)}: {_preview(hit.text or hit.preview)}")
    elif facts.hits and not facts.recency_fallback:
        lines.append("From session memory:")
        for hit in facts.hits[:5]:
            lines.append(f"- {_cite(hit)}: {_preview(hit.text or hit.preview)}")
    elif facts.hits:
        lines.append("(no semantic hits) Recent sessions:")
        for hit in facts.hits[:3]:
            lines.append(f"- {_cite(hit)}: {_preview(hit.text or hit.preview)}")
    elif trailer.intent is not Intent.ANSWER or facts.memory_answers:
        # (An answer memory has nothing for says so first, below: once is enough.)
        lines.append("Session memory has nothing on this yet.")
    if trailer.intent is Intent.ANSWER and facts.retrieval_available and not facts.memory_answers:
        lines.insert(0, f"{NOTHING_ANSWERS}.")  # said first, before anything else
    return "\n".join(lines), trailer


def _cite(hit: RetrievedHit) -> str:
    if hit.issue:
        where = f"#{hit.issue} ({hit.source})"
    elif hit.session_id:
        where = f"session {hit.session_id}"
    else:
        where = hit.source
    # Retrieval labels loose matches; an honest answer says so (docs/memory.md).
    return f"{where}, weak match" if hit.strength == Strength.WEAK else where


def _title(text: str) -> str:
    first_line = issue_title(text.strip().splitlines()[0] if text.strip() else "", limit=120)
    return first_line.rstrip(".") or "Untitled work"


def _body(message: str, focus: int | None) -> str:
    related = f"\n\nRelated: #{focus}" if focus is not None else ""
    return f"Filed from Steelframe Chat at the operator's request:\n\n> {message}{related}"


def _preview(text: str, limit: int = 160) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"


def _words(text: str) -> int:
    return len(text.split())
