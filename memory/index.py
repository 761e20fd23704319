"""The reader side of the index: cosine search over the postings of the query's terms.

`SearchIndex.search` is the one retrieval function: Chat's grounder and the workers call it
in process. It reloads the manifest when a writer (this process or another) swapped it.
"""

from __future__ import annotations

import os
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from numpy.typing import NDArray

from memory.analysis import Analyzer, idf
from memory.manifest import MANIFEST, check_database
from memory.segment import Record
from memory.snapshot import SegmentCache, Snapshot, load_snapshot, lookup

DEFAULT_K = 8
# Added to the ranking key (never to the reported score) of chunks about the focused
# issue/PR: enough to lift a relevant focus hit over a slightly better unrelated one.
FOCUS_BOOST = 0.15
PREVIEW_CHARS = 200


@dataclass(frozen=True)
class Hit:
    record: Record
    score: float  # cosine similarity, in [0, 1]

    @property
    def chunk_id(self) -> int:
        return self.record.id

    def to_json(self, *, text_limit: int | None = None) -> dict[str, Any]:
        text = self.record.text
        if text_limit is not None and len(text) > text_limit:
            text = text[: text_limit - 1] + "…"
        flat = " ".join(self.record.text.split())
        preview = flat if len(flat) <= PREVIEW_CHARS else flat[: PREVIEW_CHARS - 1] + "…"
        return {
            "id": self.record.id,
            "source": self.record.source,
            "score": round(self.score, 4),
            "repo": self.record.repo,
            "issue": self.record.issue,
            "session_id": self.record.session_id,
            "paths": list(self.record.paths),
            "created_at": self.record.created_at,
            "preview": preview,
            "text": text,
        }


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

    def search(
        self,
        query: str,
        *,
        repo: str | None,
        focus: int | None = None,
        k: int = DEFAULT_K,
        floor: float = 0.0,
        focus_only: bool = False,
    ) -> list[Hit]:
        """The top `k` chunks by cosine >= `floor`, best first (ties: newest chunk first).

        `repo` filters to one repository (None: all). `focus` lifts chunks about that
        issue/PR in the ranking, or with `focus_only` keeps only them.
        """
        snap = self.snapshot()
        terms, logtf = self.analyzer.query(query)
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
        # Unseen terms (df 0, the highest idf) stay in the query's norm: a chunk matching
        # one word of a question about something else should not look like a good match.
        weights = logtf * idf(np.maximum(df, 0), snap.live_docs)
        weights = weights / np.sqrt(float(np.dot(weights, weights)))
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
            key = score[candidates]
            if focus is not None and candidates.size:
                on_focus = segment.issue[candidates] == focus
                if focus_only:
                    candidates, key = candidates[on_focus], key[on_focus]
                else:
                    key = key + FOCUS_BOOST * on_focus
            candidates, key = _top(candidates, key, k)
            keys.append(key)
            scores.append(score[candidates])
            where.append((number, candidates))
        return _merge(snap, keys, scores, where, k)

    def df(self, tokens: list[str]) -> dict[str, int]:
        """Live document frequency of each token (for distinctive-term choices)."""
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
) -> list[Hit]:
    if not keys:
        return []
    key = np.concatenate(keys)
    score = np.concatenate(scores)
    seg = np.concatenate([np.full(c.size, n, dtype=np.int64) for n, c in where])
    local = np.concatenate([c for _, c in where])
    ids = np.concatenate([snap.segments[n].ids[c] for n, c in where]).astype(np.int64)
    order = np.lexsort((-ids, -key))[:k]
    return [Hit(snap.segments[int(seg[i])].record(int(local[i])), float(score[i])) for i in order]


def _stamp(path: Path) -> tuple[int, int, int] | None:
    try:
        stat = os.stat(path)
    except FileNotFoundError:
        return None
    return (stat.st_ino, stat.st_mtime_ns, stat.st_size)
