"""One consistent view of the index: a manifest generation with its segments and tombstones.

Segments are immutable, so a `SegmentCache` keeps them mapped across generations and a new
generation only opens the segments it adds.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
from numpy.typing import NDArray

from memory.errors import IndexCorrupt
from memory.manifest import Manifest, read_manifest
from memory.segment import Segment, SegmentInfo

_EMPTY = np.zeros(0, dtype=np.int64)
LOAD_ATTEMPTS = 3


@dataclass(frozen=True)
class Tombstones:
    """Chunks removed (replaced) since their segment was written, and what they counted in
    the document frequencies, so that df and N stay those of the live chunks exactly.

    `scrubbed`: those of them whose text the database no longer holds (forgotten, masked):
    their segments are rewritten at the next merge whatever their share of tombstones, so
    the text leaves the disk too (memory.writer.plan_merge)."""

    ids: NDArray[np.int64] = field(default_factory=lambda: _EMPTY)
    terms: NDArray[np.int64] = field(default_factory=lambda: _EMPTY)
    counts: NDArray[np.int64] = field(default_factory=lambda: _EMPTY)
    scrubbed: NDArray[np.int64] = field(default_factory=lambda: _EMPTY)
    # Read from a file written before scrubbed tombstones existed: which of them are
    # scrubbed is not known until the database is asked (`Memory.bind` asks once).
    unchecked: bool = False

    @classmethod
    def load(cls, path: Path) -> Tombstones:
        try:
            with np.load(path, allow_pickle=False) as data:
                return cls(
                    data["ids"].astype(np.int64),
                    data["terms"].astype(np.int64),
                    data["counts"].astype(np.int64),
                    # Absent from files written before scrubbing was kept apart.
                    data["scrubbed"].astype(np.int64) if "scrubbed" in data else _EMPTY,
                    unchecked="scrubbed" not in data,
                )
        except FileNotFoundError:
            raise
        except (OSError, ValueError, KeyError, EOFError) as exc:
            raise IndexCorrupt(f"tombstones {path.name} unreadable ({exc})") from exc

    def save(self, path: Path) -> None:
        with open(path, "wb") as handle:
            if self.unchecked:  # still unchecked: stays in the old form, to be checked
                np.savez(handle, ids=self.ids, terms=self.terms, counts=self.counts)
                return
            np.savez(
                handle, ids=self.ids, terms=self.terms, counts=self.counts, scrubbed=self.scrubbed
            )

    def df(self, terms: NDArray[np.int64]) -> NDArray[np.int64]:
        """How many tombstoned chunks contain each of `terms`."""
        if self.terms.size == 0 or terms.size == 0:
            return np.zeros(terms.shape[0], dtype=np.int64)
        pos = np.minimum(np.searchsorted(self.terms, terms), self.terms.size - 1)
        return np.where(self.terms[pos] == terms, self.counts[pos], 0)


@dataclass(frozen=True)
class Snapshot:
    root: Path
    manifest: Manifest
    segments: tuple[Segment, ...]
    dead_locals: tuple[NDArray[np.int64], ...]
    tombstones: Tombstones

    @property
    def live_docs(self) -> int:
        return self.manifest.live_docs

    def repo_code(self, repo: str) -> int | None:
        try:
            return self.manifest.repos.index(repo)
        except ValueError:
            return None

    def locate(self, chunk_id: int) -> tuple[Segment, int] | None:
        probe = np.asarray([chunk_id], dtype=np.int64)
        for segment in self.segments:
            found = segment.locals_of(probe)
            if found.size:
                return segment, int(found[0])
        return None

    def df(self, terms: NDArray[np.int64]) -> NDArray[np.int64]:
        """Live document frequency of each term (sorted unique ids)."""
        total = np.zeros(terms.shape[0], dtype=np.int64)
        for segment in self.segments:
            starts, ends = lookup(segment, terms)
            total += ends - starts
        return total - self.tombstones.df(terms)


def lookup(
    segment: Segment, terms: NDArray[np.int64]
) -> tuple[NDArray[np.int64], NDArray[np.int64]]:
    """Posting ranges [start, end) of each term in a segment; empty where it is absent."""
    if segment.terms.shape[0] == 0 or terms.size == 0:
        zero = np.zeros(terms.shape[0], dtype=np.int64)
        return zero, zero
    pos = np.minimum(np.searchsorted(segment.terms, terms), segment.terms.shape[0] - 1)
    found = segment.terms[pos] == terms
    starts = np.where(found, segment.tptr[pos], 0)
    ends = np.where(found, segment.tptr[pos + 1], 0)
    return starts, ends


class SegmentCache:
    def __init__(self, root: Path) -> None:
        self.root = root
        self._segments: dict[str, Segment] = {}
        self._lock = threading.Lock()

    def get(self, info: SegmentInfo) -> Segment:
        with self._lock:
            segment = self._segments.get(info.name)
            if segment is None:
                segment = Segment.load(
                    self.root / info.name, docs=info.docs, postings=info.postings
                )
                self._segments[info.name] = segment
            return segment

    def keep_only(self, names: set[str]) -> None:
        with self._lock:
            for name in set(self._segments) - names:
                del self._segments[name]


def load_snapshot(root: Path, cache: SegmentCache, *, analysis: dict[str, object]) -> Snapshot:
    """The current generation. A writer may remove the files of the generation we just read
    (after a merge); reading the manifest again then finds the new one."""
    for _attempt in range(LOAD_ATTEMPTS):
        try:
            return _load(root, cache, analysis=analysis)
        except FileNotFoundError:
            continue
    raise IndexCorrupt("index files named by the manifest are missing")


def empty_snapshot(root: Path, analysis: dict[str, object]) -> Snapshot:
    return Snapshot(root, Manifest(analysis=dict(analysis)), (), (), Tombstones())


def _load(root: Path, cache: SegmentCache, *, analysis: dict[str, object]) -> Snapshot:
    manifest = read_manifest(root, analysis=dict(analysis))
    if manifest is None:
        return empty_snapshot(root, analysis)
    segments = tuple(cache.get(info) for info in manifest.segments)
    cache.keep_only({s.name for s in segments})
    tombstones = Tombstones.load(root / manifest.dead_file) if manifest.dead_file else Tombstones()
    dead_locals = tuple(segment.locals_of(tombstones.ids) for segment in segments)
    if sum(d.size for d in dead_locals) != manifest.dead_count:
        raise IndexCorrupt("tombstones do not match the manifest")
    return Snapshot(root, manifest, segments, dead_locals, tombstones)
