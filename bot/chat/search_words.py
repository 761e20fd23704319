"""The model searches too (docs/memory.md, Grounding a Chat turn): when a model is
configured, a short rewrite step asks it for the words the answer would contain, and a
retrieval round searches with them. A paraphrase is then bridged by the model's vocabulary
("kicked off the hub before dawn" -> "broker disconnect certificate renewal nightly"), not by
a table.

The model's line is untrusted like any model output: only words are taken from it (at most
MAX_WORDS, each a run of word characters), they only ever join a search query, and a model
that fails, is slow or says nothing leaves the turn with the rounds it has.
"""

from __future__ import annotations

import asyncio
import logging
import re
from collections.abc import Awaitable, Callable

from bot.config import AgentConfig
from bot.runtimes.base import ChatMessage, Delta, Runtime, RuntimeRequest, TurnFacts, closing_stream

log = logging.getLogger(__name__)

MAX_WORDS = 12
MODEL_WORDS_SECONDS = 8.0  # the rewrite step may take this long; the turn goes on without it
MAX_OUTPUT_TOKENS = 60
INSTRUCTIONS = (
    "You help search the memory of a software project: its issues, pull requests, comments,"
    " worker sessions and chat summaries. For the operator's question, reply with exactly one"
    " line that starts with `retrieve:` followed by up to 12 search words or identifiers the"
    " chunk that answers it would likely contain: the project's likely terms, synonyms of the"
    " question's words, error names. Nothing else."
)
_LINE = re.compile(r"retrieve\s*:\s*(?P<words>.+)", re.IGNORECASE)
_WORD = re.compile(r"[\w.#/-]+")
SearchWords = Callable[[AgentConfig, str], Awaitable[tuple[str, ...]]]


def parse(text: str) -> tuple[str, ...]:
    """The words of the model's `retrieve:` line (or of its first line, if it forgot the
    prefix), at most MAX_WORDS, each once."""
    match = _LINE.search(text)
    line = match.group("words") if match else (text.strip().splitlines() or [""])[0]
    words = [w.strip(".-/") for w in _WORD.findall(line)]
    return tuple(dict.fromkeys(w for w in words if 1 < len(w) <= 64))[:MAX_WORDS]


def model_search_words(runtimes: Callable[[AgentConfig], Runtime]) -> SearchWords:
    """The rewrite step over each agent's runtime; the offline runtime proposes nothing."""

    async def propose(agent: AgentConfig, question: str) -> tuple[str, ...]:
        runtime = runtimes(agent)
        if runtime.name == "offline":
            return ()
        request = RuntimeRequest(
            system=INSTRUCTIONS,
            messages=[ChatMessage(role="user", content=question)],
            facts=TurnFacts(message=question),
            checkout=agent.checkout,
            max_output_tokens=MAX_OUTPUT_TOKENS,
        )
        try:
            async with asyncio.timeout(MODEL_WORDS_SECONDS):
                async with closing_stream(runtime.stream(request)) as events:
                    text = "".join([e.text async for e in events if isinstance(e, Delta)])
        except Exception as exc:  # the turn never fails for the rewrite step's sake
            log.warning("model search words unavailable: %s", type(exc).__name__)
            return ()
        return parse(text)

    return propose
