"""How alike short texts are: memory's analyser (stop words dropped, stemmed), tf-idf
vectors over the texts compared, cosine. Shared by the Decisions offered for a question
(bot.lifecycle.decision_drafts) and the estimate from similar past runs
(bot.lifecycle.estimate_similar)."""

from __future__ import annotations

import functools
import math
from collections import Counter
from collections.abc import Sequence

from memory.analysis import Analyzer

Vector = dict[str, float]


@functools.cache
def _analyzer() -> Analyzer:
    return Analyzer()


def vectors(texts: Sequence[str]) -> list[Vector]:
    """tf-idf vectors (1 + ln tf, idf over `texts`), each L2-normalised."""
    analyzer = _analyzer()
    counts = [Counter(analyzer.tokens(text)) for text in texts]
    df: Counter[str] = Counter(term for count in counts for term in count)
    n = len(texts)
    found = []
    for count in counts:
        vector = {t: (1 + math.log(c)) * math.log(1 + n / df[t]) for t, c in count.items()}
        norm = math.sqrt(sum(v * v for v in vector.values())) or 1.0
        found.append({t: v / norm for t, v in vector.items()})
    return found


def cosine(a: Vector, b: Vector) -> float:
    if len(b) < len(a):
        a, b = b, a
    return sum(v * b.get(t, 0.0) for t, v in a.items())
