"""The reader side of the index: cosine search over the postings of the query's terms.

`SearchIndex.search` is the one retrieval function: Chat's grounder and the workers call it
in process. It reloads the manifest when a writer (this process or another) swapped it.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TypedDict, Unpack

import numpy as np
from numpy.typing import NDArray

from memory.analysis import Analyzer, doc_weights, idf, index_text
from memory.manifest import MANIFEST, check_database
from memory.segment import Record, Segment
from memory.snapshot import SegmentCache, Snapshot, load_snapshot, lookup

DEFAULT_K = 8
# Added to the ranking key (never to the reported score) of chunks about the focused
# issue/PR: enough to lift a relevant focus hit over a slightly better unrelated one.
FOCUS_BOOST = 0.15
PREVIEW_CHARS = 200


class Narrowing(TypedDict, total=False):
    """Which chunks a search ranks and keeps (`SearchIndex.search_terms` says each one's
    meaning and default); passed through unchanged by every search entry point."""

    focus: int | None
    k: int
    floor: float
    focus_only: bool
    within: Collection[int] | None


@dataclass(frozen=True)
class Hit:
    record: Record
    # Cosine similarity in [0, 1] with the query's terms the index knows (a word no chunk
    # contains cannot tell chunks apart, so it does not dilute every score).
    score: float
    # Share of the query's weight the index knows (1.0 when it knows every word): the cosine
    # with the whole query is score * coverage. Chat uses it to call a hit weak.
    coverage: float = 1.0

    @property
    def chunk_id(self) -> int:
        return self.record.id

    @property
    def preview(self) -> str:
        """The text on one line, cut to PREVIEW_CHARS."""
        flat = " ".join(self.record.text.split())
        return flat if len(flat) <= PREVIEW_CHARS else flat[: PREVIEW_CHARS - 1] + "…"

    def text_within(self, limit: int | None) -> str:
        """The text, cut to `limit` characters (an ellipsis marks the cut)."""
        text = self.record.text
        if limit is not None and len(text) > limit:
            return text[: limit - 1] + "…"
        return text


@dataclass(frozen=True)
class Scored:
    scores: list[float]  # cosine of each record with the query (its known terms)
    coverage: float  # share of the query's weight the index knows
    coordination: list[float]  # share of the (known) query weight each record contains


class SearchIndex:
    def __init__(self, root: Path, analyzer: Analyzer) -> None:
        self.root = root
        self.analyzer = analyzer
        self._cache = SegmentCache(root)
        self._lock = threading.Lock()
        self._snapshot: Snapshot | None = None
        self._stamp: tuple[int, int, int] | None = None
        self._database: str | None = None

    def expect_database(self, identity: str) -> None:
        """Answer only from an index built from this database (checked at every reload)."""
        with self._lock:
            self._database = identity
            self._snapshot = None
            self._stamp = None

    def snapshot(self) -> Snapshot:
        """The current generation; a stat of the manifest tells whether it changed."""
        stamp = _stamp(self.root / MANIFEST)
        current = self._snapshot
        if current is not None and stamp == self._stamp:
            return current
        with self._lock:
            stamp = _stamp(self.root / MANIFEST)
            if self._snapshot is None or stamp != self._stamp:
                self._snapshot = None  # never answer from a generation we could not verify
                loaded = load_snapshot(self.root, self._cache, analysis=self.analyzer.signature)
                check_database(loaded.manifest, self._database, self.root)
                self._snapshot = loaded
                self._stamp = stamp
            return self._snapshot

    def search(self, query: str, *, repo: str | None, **narrowing: Unpack[Narrowing]) -> list[Hit]:
        """The top `k` chunks by cosine >= `floor`, best first (ties: newest chunk first);
        `search_terms` says what narrows them."""
        terms, logtf = self.analyzer.query(query)
        return self.search_terms(terms, logtf, repo=repo, **narrowing)

    # Long: one vectorised scoring pass over the segments; its arrays read together.
    def search_terms(
        self,
        terms: NDArray[np.int64],
        tf: NDArray[np.float64],
        *,
        repo: str | None,
        focus: int | None = None,
        k: int = DEFAULT_K,
        floor: float = 0.0,
        focus_only: bool = False,
        within: Collection[int] | None = None,
    ) -> list[Hit]:
        """`search` for a query given as sorted unique feature ids and their tf weights
        (`Analyzer.query`, or a weighted query such as an expansion's).

        `repo` filters to one repository (None: all). `focus` lifts chunks about that
        issue/PR in the ranking, or with `focus_only` keeps only them; `within` keeps only
        chunks about one of these issues/PRs."""
        snap = self.snapshot()
        if k <= 0 or terms.size == 0 or not snap.segments:
            return []
        code = None if repo is None else snap.repo_code(repo)
        if repo is not None and code is None:
            return []
        ranges = [lookup(segment, terms) for segment in snap.segments]
        df = sum((end - start for start, end in ranges), np.zeros(terms.size, np.int64))
        df = df - snap.tombstones.df(terms)
        known = df > 0
        if not known.any():
            return []
        weights = tf * idf(np.maximum(df, 0), snap.live_docs)
        total = float(np.dot(weights, weights))
        weights = np.where(known, weights, 0.0)
        norm = float(np.dot(weights, weights))
        weights = weights / np.sqrt(norm)
        coverage = float(np.sqrt(norm / total))
        allowed = None if within is None else np.asarray(sorted(within), dtype=np.int64)
        if focus_only and focus is not None:
            allowed = np.asarray([focus], dtype=np.int64)
        threshold = max(floor, 1e-12)
        keys: list[NDArray[np.float64]] = []
        scores: list[NDArray[np.float64]] = []
        where: list[tuple[int, NDArray[np.int64]]] = []
        for number, (segment, (starts, ends)) in enumerate(zip(snap.segments, ranges, strict=True)):
            active = np.flatnonzero((ends > starts) & known)
            if active.size == 0:
                continue
            docs = np.concatenate([segment.docs[starts[i] : ends[i]] for i in active])
            contributions = np.concatenate(
                [_weights(segment.weights, starts[i], ends[i]) * weights[i] for i in active]
            )
            score = np.bincount(docs, weights=contributions, minlength=segment.n_docs).astype(
                np.float64, copy=False
            )
            dead = snap.dead_locals[number]
            if dead.size:
                score[dead] = 0.0
            candidates = np.flatnonzero(score >= threshold)
            if code is not None and candidates.size:
                candidates = candidates[segment.repo[candidates] == code]
            if allowed is not None and candidates.size:
                candidates = candidates[np.isin(segment.issue[candidates], allowed)]
            key = score[candidates]
            if focus is not None and candidates.size:
                key = key + FOCUS_BOOST * (segment.issue[candidates] == focus)
            candidates, key = _top(candidates, key, k)
            keys.append(key)
            scores.append(score[candidates])
            where.append((number, candidates))
        return _merge(snap, keys, scores, where, k, coverage)

    def about(self, issues: Collection[int], *, repo: str | None, limit: int = 50) -> list[Record]:
        """Live chunks about any of `issues` (their `issue` field), oldest first."""
        return self._records(repo, limit, lambda s: np.flatnonzero(np.isin(s.issue, _ints(issues))))

    def linking(
        self, issues: Collection[int], *, repo: str | None, limit: int = 50
    ) -> list[Record]:
        """Live pull request chunks that close any of `issues` (`Fixes #12`), oldest first."""
        return self._records(repo, limit, lambda s: s.linking(_ints(issues)))

    def live_ids(self, *, repo: str | None) -> NDArray[np.int64]:
        """The ids of every live chunk (of one repository), ascending."""
        snap = self.snapshot()
        code = None if repo is None else snap.repo_code(repo)
        if repo is not None and code is None:
            return np.zeros(0, np.int64)
        found: list[NDArray[np.int64]] = [np.zeros(0, np.int64)]
        for segment, dead in zip(snap.segments, snap.dead_locals, strict=True):
            local = np.arange(segment.n_docs, dtype=np.int64)
            if code is not None:
                local = local[segment.repo == code]
            found.append(segment.ids[np.setdiff1d(local, dead)].astype(np.int64))
        return np.sort(np.concatenate(found))

    def records_of(self, ids: Collection[int]) -> list[Record]:
        """The live records of these chunk ids, in the order given (unknown ids left out)."""
        snap = self.snapshot()
        wanted = _ints(ids)
        found: dict[int, Record] = {}
        for segment, dead in zip(snap.segments, snap.dead_locals, strict=True):
            for local in np.setdiff1d(segment.locals_of(wanted), dead).tolist():
                found[int(segment.ids[local])] = segment.record(int(local))
        return [found[i] for i in ids if i in found]

    def closes(self, numbers: Collection[int], *, repo: str | None) -> dict[int, tuple[int, ...]]:
        """For each of `numbers` that is a pull request with closing references, the issues
        it closes (from the links recorded at indexing; no payload is read)."""
        snap = self.snapshot()
        code = None if repo is None else snap.repo_code(repo)
        wanted = _ints(numbers)
        if (repo is not None and code is None) or wanted.size == 0:
            return {}
        found: dict[int, set[int]] = {}
        for segment, dead in zip(snap.segments, snap.dead_locals, strict=True):
            local = np.flatnonzero(np.isin(segment.issue, wanted))
            if code is not None:
                local = local[segment.repo[local] == code]
            local = np.setdiff1d(local, dead)
            local = local[segment.lptr[local + 1] > segment.lptr[local]]
            for i in local.tolist():
                closed = segment.links[segment.lptr[i] : segment.lptr[i + 1]].tolist()
                found.setdefault(int(segment.issue[i]), set()).update(closed)
        return {number: tuple(sorted(closed)) for number, closed in found.items()}

    def _records(
        self, repo: str | None, limit: int, select: Callable[[Segment], NDArray[np.int64]]
    ) -> list[Record]:
        snap = self.snapshot()
        code = None if repo is None else snap.repo_code(repo)
        if repo is not None and code is None:
            return []
        found: list[tuple[int, Segment, int]] = []
        for segment, dead in zip(snap.segments, snap.dead_locals, strict=True):
            local = select(segment)
            if code is not None:
                local = local[segment.repo[local] == code]
            local = np.setdiff1d(local, dead)
            found.extend((int(segment.ids[i]), segment, int(i)) for i in local)
        found.sort(key=lambda item: item[0])
        return [segment.record(i) for _, segment, i in found[:limit]]

    def cosines(self, query: str, records: Sequence[Record]) -> Scored:
        """Each record's cosine with `query` as `search` scores it, the query's coverage
        (see Hit), and the share of the query's weight each record contains (its
        coordination): for chunks found another way (links, an expanded query) and for
        ordering the kept ones."""
        terms, logtf = self.analyzer.query(query)
        return self.cosines_terms(terms, logtf, records)

    def cosines_terms(
        self, terms: NDArray[np.int64], logtf: NDArray[np.float64], records: Sequence[Record]
    ) -> Scored:
        """`cosines` for a query given as feature ids and tf weights (`search_terms`)."""
        none = Scored([0.0] * len(records), 0.0, [0.0] * len(records))
        if not records or terms.size == 0:
            return none
        snap = self.snapshot()
        df = snap.df(terms)
        full = logtf * idf(np.maximum(df, 0), snap.live_docs)
        weights = np.where(df > 0, full, 0.0)
        norm = float(np.sqrt(np.dot(weights, weights)))
        if norm == 0.0:
            return none
        coverage = norm / float(np.sqrt(np.dot(full, full)))
        analysed = self.analyzer.batch([index_text(r.text, r.paths) for r in records])
        doc = doc_weights(analysed).astype(np.float64)
        position = np.minimum(np.searchsorted(terms, analysed.term), terms.size - 1)
        matched = terms[position] == analysed.term
        query_weight = np.where(matched, weights[position] / norm, 0.0)
        scores = np.bincount(analysed.doc, weights=doc * query_weight, minlength=len(records))
        coord = np.bincount(analysed.doc, weights=query_weight**2, minlength=len(records))
        return Scored([float(x) for x in scores], coverage, [float(x) for x in coord])

    def df(self, tokens: list[str]) -> dict[str, int]:
        """Live document frequency of each analysed term (`Analyzer.tokens`)."""
        snap = self.snapshot()
        features = {token: self.analyzer.feature(token) for token in tokens}
        wanted = np.unique(np.asarray([f for f in features.values() if f >= 0], np.int64))
        counts = dict(zip(wanted.tolist(), snap.df(wanted).tolist(), strict=True))
        return {token: int(counts.get(feature, 0)) for token, feature in features.items()}


def _weights(weights: NDArray[np.float32], start: int, end: int) -> NDArray[np.float64]:
    return weights[start:end].astype(np.float64)


def _top(
    candidates: NDArray[np.int64], key: NDArray[np.float64], k: int
) -> tuple[NDArray[np.int64], NDArray[np.float64]]:
    """At least the k best (all that tie with the k-th, so the final order is exact)."""
    if candidates.size <= k:
        return candidates, key
    kth = np.partition(key, candidates.size - k)[candidates.size - k]
    keep = key >= kth
    return candidates[keep], key[keep]


def _merge(
    snap: Snapshot,
    keys: list[NDArray[np.float64]],
    scores: list[NDArray[np.float64]],
    where: list[tuple[int, NDArray[np.int64]]],
    k: int,
    coverage: float,
) -> list[Hit]:
    if not keys:
        return []
    key = np.concatenate(keys)
    score = np.concatenate(scores)
    seg = np.concatenate([np.full(c.size, n, dtype=np.int64) for n, c in where])
    local = np.concatenate([c for _, c in where])
    ids = np.concatenate([snap.segments[n].ids[c] for n, c in where]).astype(np.int64)
    order = np.lexsort((-ids, -key))[:k]
    return [
        Hit(snap.segments[int(seg[i])].record(int(local[i])), float(score[i]), coverage)
        for i in order
    ]


def _ints(values: Collection[int]) -> NDArray[np.int64]:
    return np.asarray(sorted(set(values)), dtype=np.int64)


def _stamp(path: Path) -> tuple[int, int, int] | None:
    try:
        stat = os.stat(path)
    except FileNotFoundError:
        return None
    return (stat.st_ino, stat.st_mtime_ns, stat.st_size)
