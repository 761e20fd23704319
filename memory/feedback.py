"""Pseudo-relevance feedback (Rocchio) and the rare terms a citation repeats.

Both read term statistics the index already keeps (document frequencies), so neither needs a
vocabulary or a model:

- `expansion` picks the terms that the top hits share with *some other* chunks (mid
  frequency: not only in the hit itself, not in a large share of the index), weighted by
  their mean lnc weight in the hits times their idf, and adds them to the query at a fraction
  of an original term's weight (Rocchio's beta). It finds the chunks about the same thing in
  other words: the pull request that fixed the issue the question found.
- `rare_terms` are the terms of a chunk that few chunks contain (by idf): what a reply that
  really used the chunk repeats. Numbers, marker hashes and the question's own terms are not
  evidence of anything and are left out.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

from memory.analysis import Analyzer, doc_weights, index_text
from memory.segment import Record
from memory.snapshot import Snapshot

FEEDBACK_DOCS = 3  # top hits the centroid is taken over
EXPANSION_TERMS = 10
BETA = 0.5  # the strongest expansion term weighs this much of an original term (before idf)
MID_DF_SHARE = 0.05  # a term in more than this share of chunks says little about a topic
RARE_DF_SHARE = 0.01  # "rare" for citations: in at most this share of chunks (at least 3)
RARE_TERMS = 8
_HASHLIKE = re.compile(r"^(?=.*\d)[0-9a-f]{7,}$")  # marker hashes, commit ids, uuids' parts
# The assistant's own vocabulary: any reply about this project may use these words, rare in
# the index or not, so they are never evidence that a reply used a chunk (stemmed).
REPLY_WORDS = frozenset(
    "oper chat request file issu project worker session memori status chang updat check"
    " answer question context hit retriev repositori task work pull pr commit summari"
    " decis steelfram assist model repli".split()
)


@dataclass(frozen=True)
class Expansion:
    terms: NDArray[np.int64]  # sorted unique feature ids: the query's and the added ones
    tf: NDArray[np.float64]  # their tf weights (the index applies idf)
    added: tuple[str, ...]  # the added terms, for status frames and metadata


def expansion(
    analyzer: Analyzer, snapshot: Snapshot, query: str, feedback: Sequence[Record]
) -> Expansion:
    """The query plus the mid-frequency terms of `feedback` (Rocchio, alpha 1)."""
    terms, tf = analyzer.query(query)
    docs = list(feedback[:FEEDBACK_DOCS])
    if not docs or snapshot.live_docs == 0:
        return Expansion(terms, tf, ())
    analysed = analyzer.batch([index_text(r.text, r.paths) for r in docs])
    weights = doc_weights(analysed).astype(np.float64)
    candidates, inverse = np.unique(analysed.term, return_inverse=True)
    centroid = np.bincount(inverse, weights=weights) / len(docs)
    df = snapshot.df(candidates)
    limit = max(2, int(MID_DF_SHARE * snapshot.live_docs))
    usable = (df >= 2) & (df <= limit) & ~np.isin(candidates, terms)
    if not usable.any():
        return Expansion(terms, tf, ())
    idf = np.log((1.0 + snapshot.live_docs) / (1.0 + df)) + 1.0
    strength = np.where(usable, centroid * idf, 0.0)
    chosen = np.argsort(-strength, kind="stable")[:EXPANSION_TERMS]
    chosen = chosen[strength[chosen] > 0]
    added_tf = BETA * centroid[chosen] / centroid[chosen].max()
    names = _names(analyzer, docs, candidates[chosen])
    all_terms = np.concatenate([terms, candidates[chosen]])
    all_tf = np.concatenate([tf, added_tf])
    order = np.argsort(all_terms, kind="stable")
    return Expansion(all_terms[order], all_tf[order], names)


def rare_terms(
    analyzer: Analyzer, snapshot: Snapshot, text: str, *, exclude: str = "", n: int = RARE_TERMS
) -> list[str]:
    """The rarest terms of `text` in the index, rare meaning in at most RARE_DF_SHARE of the
    chunks; never numbers, hash-like strings, short words or the terms of `exclude`."""
    skip = set(analyzer.tokens(exclude))
    terms = sorted({t for t in analyzer.tokens(text) if t not in skip and _evidence(t)})
    if not terms:
        return []
    features = np.asarray([analyzer.feature(t) for t in terms], dtype=np.int64)
    unique, inverse = np.unique(features, return_inverse=True)
    df = snapshot.df(unique)[inverse]
    limit = max(3, int(RARE_DF_SHARE * snapshot.live_docs))
    ranked = sorted((int(d), t) for d, t in zip(df.tolist(), terms, strict=True) if 0 < d <= limit)
    return [t for _, t in ranked[:n]]


def _evidence(term: str) -> bool:
    if term.startswith("#"):
        return False  # issue numbers are checked as citations of their own
    if term.startswith("v") and term[1:2].isdigit():
        return True  # a version says which release
    return (
        len(term) >= 4
        and not term.isdigit()
        and term not in REPLY_WORDS
        and not _HASHLIKE.match(term)
    )


def _names(
    analyzer: Analyzer, docs: Sequence[Record], features: NDArray[np.int64]
) -> tuple[str, ...]:
    wanted = {int(f): i for i, f in enumerate(features.tolist())}
    names: list[str | None] = [None] * len(wanted)
    for record in docs:
        for term in analyzer.tokens(index_text(record.text, record.paths)):
            at = wanted.get(analyzer.feature(term))
            if at is not None and names[at] is None:
                names[at] = term
    return tuple(name for name in names if name is not None)
