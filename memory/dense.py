"""Dense vectors beside the lexical index, for Chat's optional hybrid ranking.

One float32 vector per chunk, normalised, keyed by chunk id, under `<memory>/dense/`: a
`meta.json` naming the provider, the model, the dimension and the database the ids belong
to, and append-only parts (`part-N.npy` with its `part-N.ids.npy`), each written to a
temporary name and renamed before `meta.json` lists it, so a crash leaves at most an unlisted
file. A chunk's text never changes under its id (an edit is a new chunk that replaces it),
so a stored vector stays right until the model, its dimension or the database changes: then
every vector is dropped and the chunks are embedded again. An unreadable store is dropped
the same way (logged), never an error for a turn. Parts are memory-mapped, kept apart in
memory (a write never copies the store) and, past COMPACT_PARTS, all but the largest are
rewritten as one, so a backfill's many writes rewrite little.

Search is a brute-force dot product over every stored vector (numpy), masked to the chunks
the caller allows (live, in its repository): docs/memory.md gives the time at 100k chunks.
"""

from __future__ import annotations

import fcntl
import json
import logging
import os
import shutil
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from numpy.typing import NDArray

log = logging.getLogger(__name__)

FOLDER = "dense"
META = "meta.json"
VERSION = 1
COMPACT_PARTS = 32  # past this many parts, all but the largest are rewritten as one


@dataclass(frozen=True)
class DenseKey:
    """What stored vectors are valid for: a change of any of these drops them."""

    provider: str
    model: str  # what the model is: its name, or for `onnx` a digest of its files
    database: str  # memory.identity of the database whose chunk ids key the vectors


@dataclass(frozen=True)
class Nearest:
    ids: list[int]  # best first
    scores: list[float]  # cosine of each with the query


class DimensionChanged(Exception):
    """The model answered vectors of another length than the stored ones."""


@dataclass(frozen=True)
class Part:
    name: str
    ids: NDArray[np.int64]
    matrix: NDArray[np.float32]  # one normalised row per id, memory-mapped once written

    def listed(self) -> dict[str, object]:
        return {"name": self.name, "count": int(self.ids.size)}


class DenseVectors:
    """The vectors of one (provider, model, database): parts loaded, appended to."""

    def __init__(self, root: Path, key: DenseKey) -> None:
        self.root = root
        self.key = key
        self._lock = threading.Lock()
        self._parts: list[Part] = []
        self._ids: NDArray[np.int64] = np.zeros(0, np.int64)  # every stored id, sorted
        self._stamp: tuple[int, int] | None = None
        self.dimension = 0

    @classmethod
    def beside(cls, memory_root: Path, key: DenseKey) -> DenseVectors:
        return cls(memory_root / FOLDER, key)

    @property
    def count(self) -> int:
        self._refresh()
        return int(self._ids.size)

    def missing(self, ids: NDArray[np.int64]) -> NDArray[np.int64]:
        """Those of `ids` with no stored vector, ascending."""
        self._refresh()
        wanted = np.unique(ids.astype(np.int64))
        return wanted[~np.isin(wanted, self._ids, assume_unique=True)]

    def add(self, ids: NDArray[np.int64], vectors: NDArray[np.float32]) -> None:
        """Store vectors (normalised here) for chunk ids; a dimension other than the stored
        one drops the stored vectors first (the model behind the name changed)."""
        if ids.size == 0:
            return
        matrix = _normalised(vectors)
        with self._lock, self._locked():
            self._load()
            if self.dimension and matrix.shape[1] != self.dimension:
                log.warning(
                    "dense vectors: %s answers %d dimensions, %d stored; embedding again",
                    self.key.model,
                    matrix.shape[1],
                    self.dimension,
                )
                self._drop()
            fresh = ~np.isin(ids, self._ids)
            if fresh.any():
                self._append(ids[fresh].astype(np.int64), matrix[fresh])

    def nearest(self, query: NDArray[np.float32], among: NDArray[np.int64], k: int) -> Nearest:
        """The `k` stored chunks of `among` closest to `query` by cosine, best first."""
        self._refresh()
        parts, dimension = self._parts, self.dimension
        if not parts or k <= 0:
            return Nearest([], [])
        if query.shape[0] != dimension:
            raise DimensionChanged(f"question has {query.shape[0]} dimensions, store {dimension}")
        unit = _normalised(query[np.newaxis, :])[0]
        if among.size > 1 and not bool(np.all(among[1:] >= among[:-1])):
            among = np.sort(among)  # sorted, for a binary search per part
        found_ids: list[NDArray[np.int64]] = [np.zeros(0, np.int64)]
        found_scores: list[NDArray[np.float32]] = [np.zeros(0, np.float32)]
        for part in parts:
            allowed = np.flatnonzero(_members(part.ids, among))
            if allowed.size == 0:
                continue
            scores = (part.matrix @ unit)[allowed]
            top = np.argpartition(-scores, min(k, scores.size) - 1)[:k]
            found_ids.append(part.ids[allowed[top]])
            found_scores.append(scores[top])
        ids, scores = np.concatenate(found_ids), np.concatenate(found_scores)
        order = np.lexsort((ids, -scores))[:k]
        return Nearest([int(i) for i in ids[order]], [float(x) for x in scores[order]])

    def drop(self) -> None:
        """Forget every vector (a dimension change, or on request)."""
        with self._lock, self._locked():
            self._drop()

    # -- files ---------------------------------------------------------------------------

    def _refresh(self) -> None:
        """Reload when another writer (or this one) changed meta.json."""
        if self._stamp is not None and _stamp(self.root / META) == self._stamp:
            return
        with self._lock:
            self._load()

    def _load(self) -> None:
        stamp = _stamp(self.root / META)
        if stamp is not None and stamp == self._stamp:
            return
        try:
            self._read()
        except (OSError, ValueError, KeyError, TypeError) as exc:
            log.warning("dense vectors in %s unreadable (%s); embedding again", self.root, exc)
            self._drop()
        self._stamp = _stamp(self.root / META)

    def _read(self) -> None:
        path = self.root / META
        if not path.exists():
            self._forget()
            return
        meta = json.loads(path.read_text())
        wanted = {
            "version": VERSION,
            "provider": self.key.provider,
            "model": self.key.model,
            "database": self.key.database,
        }
        if any(meta.get(name) != value for name, value in wanted.items()):
            log.info("dense vectors in %s are another model's or database's; dropped", self.root)
            self._drop()
            return
        dimension = int(meta["dimension"])
        known = {part.name: part for part in self._parts if self.dimension == dimension}
        self._parts = [
            known.get(str(p["name"])) or self._part(str(p["name"]), int(p["count"]), dimension)
            for p in meta["parts"]
        ]
        self.dimension = dimension
        self._index()

    def _part(self, name: str, count: int, dimension: int) -> Part:
        ids = np.load(self.root / f"{name}.ids.npy", allow_pickle=False)
        matrix = np.load(self.root / f"{name}.npy", allow_pickle=False, mmap_mode="r")
        if ids.shape != (count,) or matrix.shape != (count, dimension):
            raise ValueError(f"part {name} does not match meta.json")
        if matrix.dtype != np.float32 or ids.dtype != np.int64:
            raise ValueError(f"part {name} has the wrong types")
        return Part(name, ids, matrix)

    def _append(self, ids: NDArray[np.int64], matrix: NDArray[np.float32]) -> None:
        self.root.mkdir(parents=True, exist_ok=True)
        number = 1 + max((int(p.name.split("-")[1]) for p in self._parts), default=0)
        kept, merged = self._parts, []
        if len(self._parts) >= COMPACT_PARTS:  # all but the largest, with the new rows
            largest = max(self._parts, key=lambda p: p.ids.size)
            kept = [largest]
            merged = [p for p in self._parts if p is not largest]
            ids = np.concatenate([*(p.ids for p in merged), ids])
            matrix = np.concatenate([*(p.matrix for p in merged), matrix])
        name = f"part-{number:05d}"
        _save(self.root / f"{name}.ids.npy", ids)
        _save(self.root / f"{name}.npy", matrix)
        self._parts = [*kept, self._part(name, int(ids.size), int(matrix.shape[1]))]
        self.dimension = int(matrix.shape[1])
        self._write_meta()
        for part in merged:
            for suffix in (".ids.npy", ".npy"):
                (self.root / f"{part.name}{suffix}").unlink(missing_ok=True)
        self._index()
        self._stamp = _stamp(self.root / META)

    def _index(self) -> None:
        self._ids = np.sort(np.concatenate([np.zeros(0, np.int64), *(p.ids for p in self._parts)]))

    def _write_meta(self) -> None:
        meta = {
            "version": VERSION,
            "provider": self.key.provider,
            "model": self.key.model,
            "database": self.key.database,
            "dimension": self.dimension,
            "parts": [part.listed() for part in self._parts],
        }
        temporary = self.root / f"{META}.tmp"
        temporary.write_text(json.dumps(meta))
        os.replace(temporary, self.root / META)

    def _drop(self) -> None:
        self._forget()
        shutil.rmtree(self.root, ignore_errors=True)
        self._stamp = None

    def _forget(self) -> None:
        self._parts, self._ids, self.dimension = [], np.zeros(0, np.int64), 0

    @contextmanager
    def _locked(self) -> Iterator[None]:
        """One writer at a time across processes sharing the data dir."""
        self.root.parent.mkdir(parents=True, exist_ok=True)
        with open(self.root.parent / f"{FOLDER}.lock", "a") as handle:
            fcntl.flock(handle, fcntl.LOCK_EX)
            try:
                yield
            finally:
                fcntl.flock(handle, fcntl.LOCK_UN)


def _normalised(vectors: NDArray[np.floating]) -> NDArray[np.float32]:
    matrix = np.asarray(vectors, dtype=np.float32)
    norms = np.linalg.norm(matrix, axis=1, keepdims=True)
    return (matrix / np.where(norms > 0, norms, 1.0)).astype(np.float32)


def _members(ids: NDArray[np.int64], among: NDArray[np.int64]) -> NDArray[np.bool_]:
    """Which of `ids` are in `among` (sorted)."""
    if among.size == 0:
        return np.zeros(ids.shape, dtype=bool)
    position = np.minimum(np.searchsorted(among, ids), among.size - 1)
    found: NDArray[np.bool_] = among[position] == ids
    return found


def _save(path: Path, array: NDArray[np.generic]) -> None:
    temporary = path.with_name(path.name + ".tmp")
    with open(temporary, "wb") as handle:
        np.save(handle, array, allow_pickle=False)
    os.replace(temporary, path)


def _stamp(path: Path) -> tuple[int, int] | None:
    try:
        stat = os.stat(path)
    except FileNotFoundError:
        return None
    return (stat.st_ino, stat.st_mtime_ns)
