"""The installation's own domain words, learned from its memory (docs/memory.md, Where
domain words come from).

A team names its things its own way ("the ring" for a rollout stage, "the hub" for its
broker), and no general table knows that. Its memory does: words that keep turning up in
the same threads (an issue's title with its comments, the pull request that closes it, the
worker sessions on it) name related things. So, per repository, from its newest chunks:

- chunks are grouped into threads (an issue, its comments, its worker sessions, and the
  pull requests that close it: `Fixes #N`);
- a term found in at least MIN_THREADS threads, and in at most MAX_THREAD_SHARE of them
  (a word everywhere names nothing in particular), is related to the terms it shares most
  of its threads with: Dice coefficient 2|A and B| / (|A| + |B|) of their thread sets at
  least MIN_DICE, at most PER_TERM of them, the strongest first.

Identifiers and their parts need nothing learned: the analysis keeps `close_day` whole and
as `close` and `day` (memory.analysis). What is learned is only ever a related term, added
at a fraction of a question term's weight (memory.related), never a replacement.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from memory.analysis import Analyzer, closing_references, index_text
from memory.segment import Record

LEARN_CHUNKS = 20_000  # the newest chunks of a repository learned from
MIN_THREADS = 3
MAX_THREAD_SHARE = 0.05
MIN_DICE = 0.6
PER_TERM = 3
_EVIDENCE = re.compile(r"^[a-z][a-z0-9_-]{2,}$")  # words and identifiers, not numbers or #refs


@dataclass(frozen=True)
class DomainWords:
    """Each learned term's related terms, strongest first (analysed terms)."""

    related: dict[str, tuple[str, ...]] = field(default_factory=dict)
    threads: int = 0  # how many threads they were learned from

    def of(self, term: str) -> tuple[str, ...]:
        return self.related.get(term, ())

    def groups(self) -> list[tuple[str, ...]]:
        """As related-term groups (memory.related): a term with its related terms."""
        return [(term, *others) for term, others in self.related.items()]


def learn(analyzer: Analyzer, records: Sequence[Record]) -> DomainWords:
    """Domain words from `records` (module docstring)."""
    threads: dict[tuple[str, int], set[str]] = {}
    for record in records:
        links = (
            closing_references(record.text, record.repo) if record.source == "pull_request" else ()
        )
        if links:
            key = ("issue", min(links))
        elif record.issue is not None:
            key = ("issue", int(record.issue))
        else:
            key = ("chunk", record.id)
        terms = threads.setdefault(key, set())
        terms.update(
            t for t in analyzer.tokens(index_text(record.text, record.paths)) if _EVIDENCE.match(t)
        )
    if len(threads) < 2:
        return DomainWords(threads=len(threads))
    vocabulary: dict[str, int] = {}
    rows: list[int] = []
    cols: list[int] = []
    for row, terms in enumerate(threads.values()):
        for term in terms:
            rows.append(row)
            cols.append(vocabulary.setdefault(term, len(vocabulary)))
    # Here, not at the top: scipy costs every process that imports memory (serve, worker,
    # the CLI) about 0.2 s of CPU at start-up, and only learning domain words needs it.
    from scipy import sparse

    matrix = sparse.csr_matrix(
        (np.ones(len(rows), dtype=np.float32), (rows, cols)),
        shape=(len(threads), len(vocabulary)),
    )
    df = np.asarray(matrix.sum(axis=0)).ravel()
    limit = max(MIN_THREADS, int(MAX_THREAD_SHARE * len(threads)))
    usable = np.flatnonzero((df >= MIN_THREADS) & (df <= limit))
    if usable.size < 2:
        return DomainWords(threads=len(threads))
    sub = matrix[:, usable].tocsc()
    shared = (sub.T @ sub).tocoo()  # threads each pair of usable terms shares
    names = np.asarray(list(vocabulary))[usable]
    sizes = df[usable]
    off = shared.row != shared.col
    i, j, both = shared.row[off], shared.col[off], shared.data[off]
    dice = 2.0 * both / (sizes[i] + sizes[j])
    keep = (dice >= MIN_DICE) & (both >= MIN_THREADS)
    i, j, dice = i[keep], j[keep], dice[keep]
    order = np.lexsort((j, -dice, i))
    related: dict[str, list[str]] = {}
    for a, b in zip(i[order].tolist(), j[order].tolist(), strict=True):
        others = related.setdefault(str(names[a]), [])
        if len(others) < PER_TERM:
            others.append(str(names[b]))
    return DomainWords({k: tuple(v) for k, v in related.items()}, len(threads))
