"""How much of a question the best hits cover: the evidence of Chat's answerability verdict
(bot/chat/retrieval.py decides; docs/memory.md, Answerability, says how it was calibrated).

A hit that shares the question's common words but none of its distinctive ones does not
answer it ("What is the retention period for container logs in Loki?" against a chunk about
log retention of invoices). So each of the question's terms weighs its idf in the index
(a word no chunk contains weighs the most: memory cannot know what it names), and the
coverage is the share of that weight the hits contain: a term in a hit counts whole, a term
whose related word (memory.related, or the installation's own domain words) is in a hit
counts RELATED_CREDIT of it.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from memory.analysis import Analyzer, idf, index_text
from memory.segment import Record
from memory.snapshot import Snapshot

RELATED_CREDIT = 0.5  # a question term present only through a related word


@dataclass(frozen=True)
class Cover:
    coverage: float  # idf-weighted share of the question's terms the hits contain, 0..1
    missing: tuple[str, ...]  # the question's terms no hit contains, most distinctive first
    unknown: tuple[str, ...] = ()  # the question's terms no chunk of memory contains
    # The idf-weighted share of the question memory does not know at all (its `unknown`
    # terms), and the largest share one term no hit contains holds: one rare word missing
    # ("Loki") says more than several common ones.
    unknown_share: float = 0.0
    missing_peak: float = 0.0
    terms: int = 0  # the question's distinct terms (a short question's share is coarse)
    held: int = 0  # ...and how many of them the records contain whole (a count, not a share)


def cover(
    analyzer: Analyzer,
    snapshot: Snapshot,
    question: str,
    records: Sequence[Record],
    related: Callable[[str], set[str]],
) -> Cover:
    """The share of the question's idf weight that `records` contain (module docstring).
    `related(term)` names the terms that stand in for `term` (analysed)."""
    terms = list(dict.fromkeys(analyzer.tokens(question)))
    if not terms:
        return Cover(0.0, ())
    features = np.asarray([analyzer.feature(t) for t in terms], dtype=np.int64)
    df = snapshot.df(features)
    weights = idf(df, snapshot.live_docs)
    present: set[str] = set()
    for record in records:
        present.update(analyzer.tokens(index_text(record.text, record.paths)))
    credit = np.asarray(
        [1.0 if t in present else RELATED_CREDIT if related(t) & present else 0.0 for t in terms]
    )
    total = float(weights.sum())
    coverage = float((weights * credit).sum()) / total if total > 0 else 0.0
    order = np.argsort(-weights, kind="stable")
    missing = tuple(terms[i] for i in order.tolist() if credit[i] == 0.0)
    known = df > 0
    unknown = tuple(t for t, k in zip(terms, known.tolist(), strict=True) if not k)
    if total <= 0:
        return Cover(round(coverage, 4), missing, unknown)
    absent = weights * (credit == 0.0)
    return Cover(
        round(coverage, 4),
        missing,
        unknown,
        unknown_share=round(float(weights[~known].sum()) / total, 4),
        missing_peak=round(float(absent.max()) / total, 4),
        terms=len(terms),
        held=int((credit == 1.0).sum()),
    )
