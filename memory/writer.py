"""The writer side of the index: add segments, tombstone replaced chunks, merge, rebuild.

One writer at a time per index folder (a `flock` on `writer.lock`, so the web service, the
workers and the CLI can all write). New files are complete before the manifest that names
them is swapped in; files no manifest names are removed afterwards. Merges build their
output without the lock and take it only to swap, so adds are never held up by a merge.
"""

from __future__ import annotations

import fcntl
import logging
import os
import threading
import time
import uuid
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import replace
from pathlib import Path

import numpy as np
from numpy.typing import NDArray

from memory.analysis import Analyzer, index_text
from memory.errors import IndexUnavailable
from memory.manifest import Manifest, check_database, read_manifest, write_manifest
from memory.segment import (
    Record,
    Segment,
    SegmentBuilder,
    SegmentInfo,
    merge_segments,
    remove_segment,
)
from memory.snapshot import SegmentCache, Snapshot, Tombstones, empty_snapshot, load_snapshot

log = logging.getLogger(__name__)
Clock = Callable[[], float]
Progress = Callable[[int], None]

MERGE_FACTOR = 8  # merge this many segments of one size class into one
SEGMENT_MAX_DOCS = 250_000  # bounds merge memory and build memory; queries walk each segment
DEAD_RATIO_REWRITE = 0.25  # a segment with this share of tombstones is rewritten alone
GAP_TTL_SECONDS = 900.0  # a missed id still unseen after this was rolled back, not slow
GAP_LIMIT = 10_000
STALE_TEMP_SECONDS = 3600.0


class Update:
    """Changes made under the writer lock; the manifest is swapped when the block ends."""

    def __init__(self, writer: IndexWriter, manifest: Manifest) -> None:
        self._writer = writer
        self._snapshot: Snapshot | None = None
        self.manifest = manifest
        self.changed = False

    @property
    def snapshot(self) -> Snapshot:
        """The segments as they were when the update began (opened only if needed)."""
        if self._snapshot is None:
            self._snapshot = self._writer._load()
        return self._snapshot

    def add(self, records: Sequence[Record]) -> int:
        """Index `records` (ascending ids, none indexed yet) as new segments."""
        repos = list(self.manifest.repos)
        infos = list(self.manifest.segments)
        for start in range(0, len(records), SEGMENT_MAX_DOCS):
            batch = records[start : start + SEGMENT_MAX_DOCS]
            builder = SegmentBuilder(repo_code=_coder(repos), analyzer=self._writer.analyzer)
            builder.add(batch)
            infos.append(self._writer.place(builder))
        if records:
            self.manifest = replace(self.manifest, segments=tuple(infos), repos=tuple(repos))
            self.changed = True
        return len(records)

    def tombstone(self, chunk_ids: Iterable[int]) -> int:
        """Mark indexed chunks as removed; ids not in the index (or already dead) are skipped."""
        wanted = set(chunk_ids)
        if not wanted:
            return 0
        known = set(self.snapshot.tombstones.ids.tolist())
        found: list[Record] = []
        for chunk_id in sorted(wanted - known):
            located = self.snapshot.locate(chunk_id)
            if located is not None:
                found.append(located[0].record(located[1]))
        if not found:
            return 0
        old = self.snapshot.tombstones
        terms, counts = _doc_frequencies(self._writer.analyzer, found)
        merged = Tombstones(
            ids=np.union1d(old.ids, np.asarray([r.id for r in found], dtype=np.int64)),
            **_combine(old.terms, old.counts, terms, counts),
            scrubbed=old.scrubbed,
            unchecked=old.unchecked,
        )
        self._swap_tombstones(merged, dead_count=self.manifest.dead_count + len(found))
        return len(found)

    def scrub(self, texts: Mapping[int, str]) -> int:
        """Of the tombstoned chunks among `texts` (id -> the text the database holds now),
        mark those whose indexed text differs (forgotten, masked since) as scrubbed: their
        segments are rewritten at the next merge. An edit's earlier version, whose text the
        database keeps, is not: it leaves with its segment's ordinary merge. Tombstones read
        from a file older than scrubbing are written again in the new form, checked."""
        if not texts:
            return 0  # (without opening the snapshot, as a sync that only adds does not)
        old = self.snapshot.tombstones
        candidates = np.setdiff1d(np.asarray(sorted(texts), dtype=np.int64), old.scrubbed)
        candidates = np.intersect1d(candidates, old.ids)
        scrubbed = []
        for chunk_id in candidates.tolist():
            located = self.snapshot.locate(chunk_id)
            if located is not None and located[0].record(located[1]).text != texts[chunk_id]:
                scrubbed.append(chunk_id)
        if not scrubbed and not old.unchecked:
            return 0
        marked = replace(
            old,
            scrubbed=np.union1d(old.scrubbed, np.asarray(scrubbed, np.int64)),
            unchecked=False,
        )
        self._swap_tombstones(marked, dead_count=self.manifest.dead_count)
        return len(scrubbed)

    def _swap_tombstones(self, tombstones: Tombstones, *, dead_count: int) -> None:
        name = f"dead-{self.manifest.generation + 1:08d}-{uuid.uuid4().hex[:6]}.npz"
        tombstones.save(self._writer.root / name)
        self.manifest = replace(self.manifest, dead_file=name, dead_count=dead_count)
        self._snapshot = Snapshot(
            self.snapshot.root,
            self.manifest,
            self.snapshot.segments,
            tuple(s.locals_of(tombstones.ids) for s in self.snapshot.segments),
            tombstones,
        )
        self.changed = True

    def catch_up(self, *, watermark: int, gaps: dict[int, float]) -> None:
        if watermark != self.manifest.watermark or gaps != self.manifest.gaps:
            self.manifest = replace(self.manifest, watermark=watermark, gaps=gaps)
            self.changed = True


class IndexWriter:
    def __init__(self, root: Path, analyzer: Analyzer, *, clock: Clock = time.time) -> None:
        self.root = root
        self.analyzer = analyzer
        self.clock = clock
        self._cache = SegmentCache(root)
        self._thread_lock = threading.Lock()
        # The database this writer indexes (memory.identity); set by `Memory.bind`.
        self.database: str | None = None

    @contextmanager
    def locked(self) -> Iterator[None]:
        self.root.mkdir(parents=True, exist_ok=True)
        with self._thread_lock, open(self.root / "writer.lock", "a+b") as handle:
            fcntl.flock(handle.fileno(), fcntl.LOCK_EX)
            try:
                yield
            finally:
                fcntl.flock(handle.fileno(), fcntl.LOCK_UN)

    @contextmanager
    def update(self) -> Iterator[Update]:
        with self.locked():
            manifest = self._manifest()
            # Never add this database's rows to an index of another one.
            check_database(manifest, self.database, self.root)
            if manifest.database is None:
                manifest = replace(manifest, database=self.database)
            update = Update(self, manifest)
            yield update
            if update.changed:
                self._swap(update.manifest.next())

    def place(self, builder: SegmentBuilder) -> SegmentInfo:
        """Write a built segment under a temporary name and move it into place."""
        temporary = self.root / f"tmp-{uuid.uuid4().hex}"
        info = builder.write(temporary)
        name = f"seg-{uuid.uuid4().hex[:12]}"
        os.rename(temporary, self.root / name)
        return SegmentInfo(name, info.docs, info.postings)

    # -- merging -------------------------------------------------------------------------

    def merge_due(self) -> bool:
        return bool(plan_merge(self._load()))

    def merge_once(self, *, scrubbed_only: bool = False) -> bool:
        """Merge one planned group of segments; False when nothing is due or it raced.
        `scrubbed_only`: only a rewrite that takes a scrubbed chunk's text off the disk."""
        with self.locked():
            snapshot = self._load()
            plan = plan_merge(snapshot, scrubbed_only=scrubbed_only)
            if not plan:
                return False
        chosen = [s for s in snapshot.segments if s.name in plan]
        dropped = np.concatenate(
            [
                s.ids[d]
                for s, d in zip(snapshot.segments, snapshot.dead_locals, strict=True)
                if s.name in plan
            ]
            or [np.zeros(0, np.int64)]
        )
        temporary = self.root / f"tmp-{uuid.uuid4().hex}"
        info = merge_segments(temporary, chosen, dropped)
        with self.locked():
            current = self._load()
            if not set(plan) <= {s.name for s in current.manifest.segments}:
                remove_segment(temporary)  # another writer merged or rebuilt meanwhile
                return False
            kept = tuple(s for s in current.manifest.segments if s.name not in plan)
            name = f"seg-{uuid.uuid4().hex[:12]}"
            if info.docs:
                os.rename(temporary, self.root / name)
                kept = (*kept, SegmentInfo(name, info.docs, info.postings))
            else:  # every chunk in it had been replaced
                remove_segment(temporary)
            manifest = replace(current.manifest, segments=kept)
            manifest = self._without_tombstones(current, manifest, chosen, dropped)
            self._swap(manifest.next())
        log.info("memory index: merged %d segments into %s (%d docs)", len(plan), name, info.docs)
        return True

    def _without_tombstones(
        self,
        current: Snapshot,
        manifest: Manifest,
        chosen: list[Segment],
        dropped: NDArray[np.int64],
    ) -> Manifest:
        if dropped.size == 0:
            return manifest
        records: list[Record] = []
        for segment in chosen:
            records.extend(segment.record(int(i)) for i in segment.locals_of(dropped))
        terms, counts = _doc_frequencies(self.analyzer, records)
        old = current.tombstones
        remaining = Tombstones(
            ids=np.setdiff1d(old.ids, dropped),
            **_combine(old.terms, old.counts, terms, -counts),
            scrubbed=np.setdiff1d(old.scrubbed, dropped),
            unchecked=old.unchecked,
        )
        if remaining.ids.size == 0:
            return replace(manifest, dead_file=None, dead_count=0)
        name = f"dead-{manifest.generation + 1:08d}-{uuid.uuid4().hex[:6]}.npz"
        remaining.save(self.root / name)
        return replace(manifest, dead_file=name, dead_count=manifest.dead_count - dropped.size)

    # -- rebuilding ----------------------------------------------------------------------

    def rebuild(
        self,
        batches: Iterable[Sequence[Record]],
        *,
        catch_up: Callable[[], tuple[int, dict[int, float]]],
        progress: Progress | None = None,
    ) -> Manifest:
        """A new index from `batches` (ascending ids), swapped in whole at the end.

        `catch_up` is asked after the last batch for the watermark and gaps the batches
        covered; readers keep using the old index until the swap.
        """
        self.root.mkdir(parents=True, exist_ok=True)
        repos: list[str] = []
        infos: list[SegmentInfo] = []
        temporaries: list[tuple[Path, SegmentInfo]] = []
        builder = SegmentBuilder(repo_code=_coder(repos), analyzer=self.analyzer)
        done = 0
        try:
            for batch in batches:
                builder.add(batch)
                done += len(batch)
                if progress is not None:
                    progress(done)
                if builder.n_docs >= SEGMENT_MAX_DOCS:
                    temporaries.append(self._write_temporary(builder))
                    builder = SegmentBuilder(repo_code=_coder(repos), analyzer=self.analyzer)
            if builder.n_docs:
                temporaries.append(self._write_temporary(builder))
            watermark, gaps = catch_up()
        except BaseException:
            for path, _ in temporaries:
                remove_segment(path)
            raise
        with self.locked():
            for path, info in temporaries:
                name = f"seg-{uuid.uuid4().hex[:12]}"
                os.rename(path, self.root / name)
                infos.append(SegmentInfo(name, info.docs, info.postings))
            generation = self._generation()
            manifest = Manifest(
                analysis=dict(self.analyzer.signature),
                generation=generation + 1,
                segments=tuple(infos),
                repos=tuple(repos),
                watermark=watermark,
                gaps=gaps,
                database=self.database,
            )
            self._swap(manifest)
        return manifest

    def _write_temporary(self, builder: SegmentBuilder) -> tuple[Path, SegmentInfo]:
        temporary = self.root / f"tmp-{uuid.uuid4().hex}"
        return temporary, builder.write(temporary)

    # -- internals -----------------------------------------------------------------------

    def _load(self) -> Snapshot:
        if not self.root.exists():
            return empty_snapshot(self.root, self.analyzer.signature)
        return load_snapshot(self.root, self._cache, analysis=self.analyzer.signature)

    def _manifest(self) -> Manifest:
        manifest = read_manifest(self.root, analysis=dict(self.analyzer.signature))
        return manifest if manifest is not None else Manifest(dict(self.analyzer.signature))

    def _generation(self) -> int:
        try:
            manifest = read_manifest(self.root, analysis=dict(self.analyzer.signature))
        except IndexUnavailable:
            return 0  # a corrupt or foreign index is being replaced
        return manifest.generation if manifest is not None else 0

    def _swap(self, manifest: Manifest) -> None:
        write_manifest(self.root, manifest)
        self._collect(manifest)

    def _collect(self, manifest: Manifest) -> None:
        """Remove what no manifest names: merged-away segments, old tombstones, and
        temporary files abandoned by a crashed writer."""
        live = {s.name for s in manifest.segments} | {manifest.dead_file}
        now = time.time()  # compared with file mtimes, which are wall-clock time
        for entry in os.scandir(self.root):
            if entry.name in live:
                continue
            if entry.name.startswith("seg-"):
                remove_segment(Path(entry.path))
            elif entry.name.startswith("dead-"):
                Path(entry.path).unlink(missing_ok=True)
            elif entry.name.startswith("tmp-") and now - entry.stat().st_mtime > STALE_TEMP_SECONDS:
                remove_segment(Path(entry.path))


def plan_merge(snapshot: Snapshot, *, scrubbed_only: bool = False) -> list[str]:
    """Names of segments to merge next, or [] (a log-structured, tiered policy). First a
    segment holding a scrubbed chunk's text, rewritten alone; `scrubbed_only`: nothing else."""
    infos = snapshot.manifest.segments
    scrubbed = snapshot.tombstones.scrubbed
    for info, segment in zip(infos, snapshot.segments, strict=True):
        if scrubbed.size and segment.locals_of(scrubbed).size:
            return [info.name]
    if scrubbed_only:
        return []
    for info, dead in zip(infos, snapshot.dead_locals, strict=True):
        if info.docs and dead.size / info.docs >= DEAD_RATIO_REWRITE:
            return [info.name]
    levels: dict[int, list[SegmentInfo]] = {}
    for info in infos:
        if info.docs < SEGMENT_MAX_DOCS // 2:
            levels.setdefault(_level(info.docs), []).append(info)
    for level in sorted(levels):
        group = sorted(levels[level], key=lambda i: i.docs)
        if len(group) < MERGE_FACTOR:
            continue
        chosen: list[str] = []
        total = 0
        for info in group:
            if total + info.docs > SEGMENT_MAX_DOCS:
                break
            chosen.append(info.name)
            total += info.docs
        if len(chosen) >= 2:
            return chosen
    return []


def prune_gaps(gaps: dict[int, float], now: float) -> dict[int, float]:
    fresh = {i: t for i, t in gaps.items() if now - t < GAP_TTL_SECONDS}
    if len(fresh) > GAP_LIMIT:
        fresh = dict(sorted(fresh.items())[-GAP_LIMIT:])
    return fresh


def _level(docs: int) -> int:
    level = 0
    while docs >= MERGE_FACTOR:
        docs //= MERGE_FACTOR
        level += 1
    return level


def _coder(repos: list[str]) -> Callable[[str], int]:
    codes = {repo: i for i, repo in enumerate(repos)}

    def code(repo: str) -> int:
        if repo not in codes:
            codes[repo] = len(repos)
            repos.append(repo)
        return codes[repo]

    return code


def _doc_frequencies(
    analyzer: Analyzer, records: Sequence[Record]
) -> tuple[NDArray[np.int64], NDArray[np.int64]]:
    """(term, number of these records containing it), as the index counted them."""
    terms = analyzer.batch([index_text(r.text, r.paths) for r in records])
    unique, counts = np.unique(terms.term, return_counts=True)
    return unique.astype(np.int64), counts.astype(np.int64)


def _combine(
    terms_a: NDArray[np.int64],
    counts_a: NDArray[np.int64],
    terms_b: NDArray[np.int64],
    counts_b: NDArray[np.int64],
) -> dict[str, NDArray[np.int64]]:
    terms = np.concatenate([terms_a, terms_b])
    counts = np.concatenate([counts_a, counts_b])
    unique, inverse = np.unique(terms, return_inverse=True)
    summed = np.bincount(inverse, weights=counts, minlength=unique.size).astype(np.int64)
    keep = summed != 0
    return {"terms": unique[keep].astype(np.int64), "counts": summed[keep]}
