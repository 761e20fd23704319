"""The estimate from similar past runs (issue 34; docs/lifecycle.md, "Estimates"): each of
the repository's past tasks counts by how like the new task it is, by agent, by the size of
the issue text and by the likeness of that text (bot.text_likeness), and the estimate is
the weighted median and 90th percentile of what they spent. Its typical error is measured
on the repository's own past: each of its latest tasks estimated from the tasks before it.

The weights were fixed before the estimate was measured on the generated history of
bench/estimates.py, and not tuned on it."""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from dataclasses import dataclass

from bot import text_likeness

# A past task run by another agent counts this much of one run by the same agent (an
# agent's spend differs by its model and habits); one whose agent is unknown, half.
OTHER_AGENT = 0.2
UNKNOWN_AGENT = 0.5
# Issue text sizes compare as a ratio, softened so that two short texts count as alike.
SIZE_SOFTENING = 50
# Even an unlike text counts a little: the repository itself says something.
TEXT_FLOOR = 0.1
# The typical error: measured on this many of the latest tasks, each needing this many
# before it; below that no error is claimed.
BACKTEST = 30
MIN_BEFORE = 5


@dataclass(frozen=True)
class Past:
    """One finished task: what it spent, the agent that ran it and its issue text."""

    tokens: int
    usd: float
    agent: str | None
    text: str


@dataclass(frozen=True)
class Weighted:
    tokens: int
    tokens_p90: int
    usd: float | None
    usd_p90: float | None
    similar: int  # how many runs the weights amount to (Kish's effective number)


def _agent_weight(agent: str | None, past: str | None) -> float:
    if agent is None:
        return 1.0
    if past is None:
        return UNKNOWN_AGENT
    return 1.0 if past == agent else OTHER_AGENT


def _size_weight(size: int, past: int) -> float:
    low, high = sorted((size, past))
    return (low + SIZE_SOFTENING) / (high + SIZE_SOFTENING)


def weights(
    agent: str | None,
    text: str,
    history: Sequence[Past],
    vectors: Sequence[text_likeness.Vector] | None = None,
) -> list[float]:
    """How much each past task counts for a new task of `agent` with issue text `text`
    (`vectors`: the history's and then the text's, when already made)."""
    if vectors is None:
        vectors = text_likeness.vectors([*(p.text for p in history), text])
    asked = vectors[len(history)]
    return [
        _agent_weight(agent, past.agent)
        * _size_weight(len(text), len(past.text))
        * (TEXT_FLOOR + max(0.0, text_likeness.cosine(vectors[i], asked)))
        for i, past in enumerate(history)
    ]


def quantile(values: Sequence[float], weights: Sequence[float], q: float) -> float:
    """The weighted q-quantile: the least value whose weight, with all below it, reaches q
    of the total."""
    pairs = sorted(zip(values, weights, strict=True))
    total = sum(w for _, w in pairs)
    reached = 0.0
    for value, weight in pairs:
        reached += weight
        if reached >= q * total:
            return value
    return pairs[-1][0]


def estimate(
    agent: str | None,
    text: str,
    history: Sequence[Past],
    vectors: Sequence[text_likeness.Vector] | None = None,
) -> Weighted | None:
    if not history:
        return None
    w = weights(agent, text, history, vectors)
    tokens = [float(p.tokens) for p in history]
    paid = [(p.usd, wi) for p, wi in zip(history, w, strict=True) if p.usd > 0]
    usd = usd_p90 = None
    if paid:
        usd = round(quantile([c for c, _ in paid], [x for _, x in paid], 0.5), 4)
        usd_p90 = round(quantile([c for c, _ in paid], [x for _, x in paid], 0.9), 4)
    squares = sum(x * x for x in w)
    return Weighted(
        tokens=int(quantile(tokens, w, 0.5)),
        tokens_p90=int(quantile(tokens, w, 0.9)),
        usd=usd,
        usd_p90=usd_p90,
        similar=max(1, round(sum(w) ** 2 / squares)) if squares else len(history),
    )


def typical_error(history: Sequence[Past]) -> float | None:
    """The median relative error (0.25: off by 25%) of the estimate on the latest BACKTEST
    tasks of `history` (oldest first), each from the tasks before it; None with too few."""
    errors = []
    # Each text analysed once (the idf over the whole history: it knows the later texts'
    # words, never their spend).
    vectors = text_likeness.vectors([p.text for p in history])
    for index in range(max(MIN_BEFORE, len(history) - BACKTEST), len(history)):
        actual = history[index]
        made = [*vectors[:index], vectors[index]]
        guess = estimate(actual.agent, actual.text, history[:index], made)
        if guess is not None and actual.tokens > 0:
            errors.append(abs(actual.tokens - guess.tokens) / actual.tokens)
    if len(errors) < MIN_BEFORE:
        return None
    return statistics.median(errors)
