"""`Memory`: the chunk store, its on-disk index and the search everyone calls, in one object.

Built once per process from a folder (under the data dir) and a session factory, then
passed down: `memory.search(query, repo=..., focus=..., k=..., floor=...)` is the same call
for Chat and for the workers, in process, no HTTP hop.
"""

from __future__ import annotations

import functools
import logging
import time
from collections.abc import Callable, Collection, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass
from pathlib import Path
from typing import Unpack

import numpy as np
from numpy.typing import NDArray
from sqlalchemy.orm import Session

from memory import chunks, sync
from memory.analysis import Analyzer
from memory.answerability import Cover, cover
from memory.chunks import Added, ChunkIn, ChunkSource, Now, utcnow
from memory.domain import LEARN_CHUNKS, learn
from memory.errors import IndexCorrupt, IndexIncompatible, IndexUnavailable
from memory.feedback import Expansion, expansion, rare_terms
from memory.identity import database_identity
from memory.index import DEFAULT_K, Hit, Narrowing, Scored, SearchIndex
from memory.manifest import Manifest, read_manifest
from memory.related import LEARNED_WEIGHT, Related, expand, related_of
from memory.segment import Record
from memory.snapshot import Snapshot
from memory.writer import IndexWriter, plan_merge

log = logging.getLogger(__name__)
SessionFactory = Callable[[], AbstractContextManager[Session]]
FOLDER = "memory"  # the index lives in <data dir>/memory
RELEARN_SHARE = 0.05  # domain words are learned again once memory grew by this share...
RELEARN_MIN = 20  # ...and by at least this many chunks


@dataclass(frozen=True)
class IndexStats:
    """The index as one generation has it (readiness shows `chunks`)."""

    generation: int
    chunks: int  # live: added and not deleted
    segments: int
    tombstones: int  # deleted chunks still in a segment, until a merge drops them
    watermark: int  # every chunk id up to it is indexed, but the gaps
    gaps: int  # ids not visible when the watermark passed them (rolled back, or in flight)


@functools.cache
def _default_related() -> Related:
    """The built-in related-term groups, analysed once per process (~30 ms each time): the
    analyser has no settings, and a Related is never changed after it is made."""
    return Related.analysed(Analyzer().tokens)


class Memory:
    def __init__(
        self,
        root: Path,
        sessions: SessionFactory,
        *,
        clock: Now = utcnow,
        wall: Callable[[], float] = time.time,
    ) -> None:
        self.root = root
        self.sessions = sessions
        self.clock = clock
        self.analyzer = Analyzer()
        self.index = SearchIndex(root, self.analyzer)
        self.writer = IndexWriter(root, self.analyzer, clock=wall)
        self.related = _default_related()
        # Per repository: its learned domain words (memory.domain) and the live chunk count
        # they were learned at; relearned once memory grew by RELEARN_SHARE.
        self._learned: dict[str, tuple[int, Related]] = {}
        self._committed: dict[tuple[str, ...], Related] = {}  # `related:` tables, analysed
        self._bound = False
        # Memory.recent's answers, each with the snapshot (generation) it was read under.
        self._recent: dict[tuple[str, ChunkSource, int], tuple[Snapshot, tuple[Hit, ...]]] = {}

    @classmethod
    def in_data_dir(
        cls, data_dir: Path, sessions: SessionFactory, *, clock: Now = utcnow
    ) -> Memory:
        """The memory of a Steelframe installation: its index under the data dir."""
        return cls(data_dir / FOLDER, sessions, clock=clock)

    def bind(self, *, progress: Callable[[int, int], None] | None = None) -> str:
        """Tie the index to this memory's database (memory.identity): from now on it reads
        and writes only an index built from it. An index built from another database (or
        before identities existed) is rebuilt from this one, reporting `progress`.
        An index built with another analysis (an older Steelframe: ANALYSIS_VERSION) is
        rebuilt the same way, and so is a corrupt one (an unreadable manifest, a missing or
        truncated file): the rows are the truth. Returns "current", "new" or "rebuilt".
        Called at start; every use binds first."""
        identity = self._identify()
        try:
            manifest = read_manifest(self.root, analysis=dict(self.analyzer.signature))
        except IndexIncompatible:
            log.warning(
                "memory: the index in %s was built with another analysis; rebuilding", self.root
            )
            self.reindex(progress=progress)
            return "rebuilt"
        except IndexCorrupt as exc:
            return self._rebuild_corrupt(exc, progress)
        if manifest is None or (manifest.database is None and not manifest.segments):
            return "new"
        if manifest.database == identity:
            try:
                snapshot = self.index.snapshot()  # every file the manifest names, checked
            except IndexCorrupt as exc:
                return self._rebuild_corrupt(exc, progress)
            if snapshot.tombstones.unchecked and snapshot.tombstones.ids.size:
                self._check_old_tombstones()
            return "current"
        log.warning(
            "memory: the index in %s was built from another database; rebuilding it from "
            "this one (%d chunks were indexed there)",
            self.root,
            manifest.live_docs,
        )
        self.reindex(progress=progress)
        return "rebuilt"

    def repair(self) -> str:
        """An index a running process found corrupt, rebuilt from the rows as a start rebuilds
        it (`bind`): "rebuilt", or "current" when it reads whole now (another process
        repaired it meanwhile) or the rebuild failed (logged)."""
        self._ensure_bound()
        try:
            self.index.snapshot()  # the manifest read again, every file it names checked
        except IndexCorrupt as exc:
            return self._rebuild_corrupt(exc, None)
        return "current"

    def _rebuild_corrupt(
        self, exc: IndexCorrupt, progress: Callable[[int, int], None] | None
    ) -> str:
        """A corrupt index rebuilt from the rows. The rebuild writes fresh segments and swaps
        the manifest under the writer lock, as `reindex` does while the service runs; if it
        cannot (a full or read-only disk), the index stays as it is, reported on use, and
        the process starts all the same."""
        log.warning(
            "memory: the index in %s is corrupt (%s); rebuilding it from the database",
            self.root,
            exc.message,
        )
        try:
            manifest = self.reindex(progress=progress)
        except (IndexUnavailable, OSError) as failed:
            reason = failed.message if isinstance(failed, IndexUnavailable) else str(failed)
            log.error("memory: rebuilding the index in %s failed: %s", self.root, reason)
            return "current"
        log.warning(
            "memory: the index in %s was rebuilt from the database (%d chunks)",
            self.root,
            manifest.live_docs,
        )
        return "rebuilt"

    def _identify(self) -> str:
        with self.sessions() as session:
            identity = database_identity(session)
        self.writer.database = identity
        self.index.expect_database(identity)
        self._bound = True
        return identity

    def _ensure_bound(self) -> None:
        if not self._bound:
            self.bind()

    def search(self, query: str, *, repo: str | None, **narrowing: Unpack[Narrowing]) -> list[Hit]:
        """Top chunks by TF-IDF cosine (see memory.index.SearchIndex.search_terms)."""
        self._ensure_bound()
        return self.index.search(query, repo=repo, **narrowing)

    def feedback_search(
        self,
        query: str,
        feedback: Sequence[Record],
        *,
        repo: str | None,
        focus: int | None = None,
        k: int = DEFAULT_K,
        floor: float = 0.0,
    ) -> tuple[list[Hit], Expansion]:
        """`search` with the query expanded by pseudo-relevance feedback from `feedback`
        (Rocchio over the mid-frequency terms of those chunks; memory.feedback). Scores are
        cosines with the expanded query."""
        self._ensure_bound()
        grown = expansion(self.analyzer, self.index.snapshot(), query, feedback)
        hits = self.index.search_terms(
            grown.terms, grown.tf, repo=repo, focus=focus, k=k, floor=floor
        )
        return hits, grown

    def related_search(
        self,
        query: str,
        *,
        repo: str | None,
        focus: int | None = None,
        k: int = DEFAULT_K,
        floor: float = 0.0,
        related: Sequence[str] = (),
    ) -> tuple[list[Hit], Expansion]:
        """`search` with the question's related terms added (memory.related: "bill" also
        asks for "invoice"), at a fraction of a question term's weight. Scores are cosines
        with the grown query; `Expansion.added` names the terms added. Related terms come
        from the general table, the repository's learned domain words and `related` (the
        lines of its committed `related:` table)."""
        self._ensure_bound()
        sources = self.related_sources(repo, related)
        grown = expand(self.analyzer, self.index.snapshot(), sources, query)
        hits = self.index.search_terms(
            grown.terms, grown.tf, repo=repo, focus=focus, k=k, floor=floor
        )
        return hits, grown

    def about(self, issues: Collection[int], *, repo: str | None, limit: int = 50) -> list[Record]:
        """Live chunks about these issues/PRs (their own text, comments, sessions), the
        oldest `limit` of them, oldest first."""
        self._ensure_bound()
        return self.index.about(issues, repo=repo, limit=limit)

    def linking(self, issues: Collection[int], *, repo: str | None) -> list[Record]:
        """Live pull request chunks whose text closes one of these issues (`Fixes #N`)."""
        self._ensure_bound()
        return self.index.linking(issues, repo=repo)

    def closes(self, numbers: Collection[int], *, repo: str | None) -> dict[int, tuple[int, ...]]:
        """The issues each pull request among `numbers` closes (`Fixes #N`), by number: a
        comment on PR #59 belongs to the thread of the issue #59 fixes."""
        self._ensure_bound()
        return self.index.closes(numbers, repo=repo)

    def live_ids(self, *, repo: str | None) -> NDArray[np.int64]:
        """Every live chunk's id (of one repository), ascending: what dense vectors cover."""
        self._ensure_bound()
        return self.index.live_ids(repo=repo)

    def records_of(self, ids: Collection[int]) -> list[Record]:
        """The live records of these chunk ids, in that order (gone ones left out)."""
        self._ensure_bound()
        return self.index.records_of(ids)

    @property
    def database(self) -> str:
        """The identity of the database this memory is bound to (memory.identity)."""
        self._ensure_bound()
        return self.writer.database or ""

    def cosines(self, query: str | Expansion, records: Sequence[Record]) -> Scored:
        """Each record's cosine with `query` (a question, or a grown query), its coverage
        and coordination (memory.index.SearchIndex.cosines)."""
        self._ensure_bound()
        if isinstance(query, Expansion):
            return self.index.cosines_terms(query.terms, query.tf, records)
        return self.index.cosines(query, records)

    def coverage(
        self,
        question: str,
        records: Sequence[Record],
        *,
        repo: str | None = None,
        related: Sequence[str] = (),
    ) -> Cover:
        """How much of the question's distinctive vocabulary `records` contain (memory.
        answerability): the evidence of Chat's answerability verdict. A question term
        counts in part through its related terms (the same sources as `related_search`)."""
        self._ensure_bound()
        sources = self.related_sources(repo, related)

        def related_terms(term: str) -> set[str]:
            return set(related_of(sources, [term], set()))

        return cover(self.analyzer, self.index.snapshot(), question, records, related_terms)

    def related_sources(self, repo: str | None, committed: Sequence[str] = ()) -> list[Related]:
        """The related-term sources of a repository: the general table, its learned domain
        words (memory.domain) and its committed `related:` table's lines."""
        sources = [self.related]
        if committed:
            key = tuple(committed)
            table = self._committed.get(key)
            if table is None:
                if len(self._committed) > 16:
                    self._committed.clear()
                table = self._committed[key] = Related.of_lines(self.analyzer.tokens, key)
            sources.append(table)
        if repo is not None:
            sources.append(self._domain(repo))
        return sources

    def _domain(self, repo: str) -> Related:
        """The repository's learned domain words, relearned when memory grew by a share."""
        live = self.index.snapshot().live_docs
        learned = self._learned.get(repo)
        if learned is not None and live - learned[0] < max(RELEARN_MIN, RELEARN_SHARE * learned[0]):
            return learned[1]
        with self.sessions() as session:
            records = chunks.newest(session, repo=repo, limit=LEARN_CHUNKS)
        words = learn(self.analyzer, records)
        table = Related.of_terms(words.groups(), weight=LEARNED_WEIGHT)
        self._learned[repo] = (live, table)
        return table

    def add(self, items: Sequence[ChunkIn]) -> list[Added]:
        """Store chunks in their own transaction, then bring the index up to date. The rows
        are what is stored: an index that cannot catch up now (corrupt, a full or read-only
        disk) is logged, not raised, as the rows are already committed and the next sync or
        `steelframe memory reindex` indexes them; raising made a caller think nothing was
        stored and add it again (`steelframe memory add` printed a traceback and a re-run
        stored the note twice)."""
        with self.sessions() as session:
            added = chunks.add_chunks(session, items, clock=self.clock)
        self._catch_up("stored", [a.id for a in added])
        return added

    def _catch_up(self, done: str, ids: Sequence[int], *, forgot: bool = False) -> None:
        """`sync` after rows were committed: an index that cannot catch up now is logged,
        not raised (the rows are the truth; the next sync or a reindex catches up). After a
        forget, the segments holding the forgotten text are rewritten without it, here,
        rather than at their next merge (which a large segment may not see for months)."""
        try:
            self.sync()
            if forgot:
                self._rewrite_scrubbed()
        except (IndexUnavailable, OSError) as exc:
            reason = exc.message if isinstance(exc, IndexUnavailable) else str(exc)
            log.warning(
                "memory: chunk(s) %s %s; the index in %s is not caught up: %s",
                ", ".join(str(i) for i in ids),
                done,
                self.root,
                reason,
            )

    def retract(self, keys: Sequence[str]) -> list[int]:
        """Forget the chunks under `keys` in their own transaction (memory.chunks.retract),
        then bring the index up to date: no search answers from them after this returns.
        The ids forgotten (a key with no live chunk is skipped)."""
        with self.sessions() as session:
            found = [chunks.retract(session, key, clock=self.clock) for key in keys]
        self.sync()
        self._rewrite_scrubbed()
        return [chunk_id for chunk_id in found if chunk_id is not None]

    def _check_old_tombstones(self) -> None:
        """Tombstones written before scrubbed ones existed: those whose text the database
        no longer holds (forgotten, masked) are marked scrubbed and rewritten away now, once
        (the file is written again in the new form)."""
        with self.writer.update() as update, self.sessions() as session:
            ids = update.snapshot.tombstones.ids.tolist()
            scrubbed = update.scrub(chunks.current_texts(session, ids))
        if scrubbed:
            log.warning(
                "memory: %d forgotten chunk(s) still in the index's files from before; "
                "rewriting their segments without them",
                scrubbed,
            )
            self._rewrite_scrubbed()

    def _rewrite_scrubbed(self) -> int:
        """Rewrite each segment that holds a forgotten or masked chunk's text without it."""
        rewritten = 0
        while self.writer.merge_once(scrubbed_only=True):
            rewritten += 1
        return rewritten

    def forget_key(self, key: str) -> chunks.Forgotten | None:
        """`retract` of one key, saying what was forgotten (None: no live chunk under it);
        an index that cannot catch up is logged, as in `add`."""
        with self.sessions() as session:
            forgotten = chunks.retract_key(session, key, clock=self.clock)
        if forgotten is not None:
            self._catch_up("forgotten", [forgotten.id], forgot=True)
        return forgotten

    def forget_issue(
        self, repo: str, issue: int, *, sources: Collection[ChunkSource] | None = None
    ) -> list[chunks.Forgotten]:
        """Forget the live chunks about an issue or PR of `repo` (of these `sources`, None:
        all) in their own transaction (memory.chunks.retract_issue), then bring the index up
        to date (an index that cannot is logged, as in `add`): what was forgotten, oldest
        first."""
        with self.sessions() as session:
            forgotten = chunks.retract_issue(
                session, repo, issue, sources=sources, clock=self.clock
            )
        self._catch_up("forgotten", [f.id for f in forgotten], forgot=True)
        return forgotten

    def forget_saying(self, repo: str, phrase: str, *, at_most: int) -> list[chunks.Forgotten]:
        """Forget the live chunks of `repo` whose text contains `phrase` (case aside; at most
        `at_most` of them, else TooBroad and nothing forgotten), then bring the index up to
        date, as `forget_issue` does (memory.chunks.retract_saying)."""
        with self.sessions() as session:
            forgotten = chunks.retract_saying(
                session, repo, phrase, at_most=at_most, clock=self.clock
            )
        self._catch_up("forgotten", [f.id for f in forgotten], forgot=True)
        return forgotten

    def sync(self, *, limit: int = sync.SYNC_BATCH) -> sync.SyncReport:
        """Catch the index up with the rows; an index built with another analysis (an older
        version of Steelframe) met here is rebuilt first, its progress logged. When no row
        is new (memory.sync.pending: one query), nothing is locked, read or written."""
        self._ensure_bound()
        current = self._unchanged()
        if current is not None:
            return sync.SyncReport(0, 0, current.watermark, behind=False)
        try:
            with self.sessions() as session:
                return sync.sync(session, self.writer, limit=limit)
        except IndexIncompatible:
            self.reindex(progress=_log_progress)
            with self.sessions() as session:
                return sync.sync(session, self.writer, limit=limit)

    def upgrade_index(self, *, progress: Callable[[int, int], None] | None = None) -> bool:
        """At start-up, with a progress bar: rebuild an index built with another analysis
        or from another database (`bind`). Returns whether it rebuilt."""
        return self.bind(progress=progress) == "rebuilt"

    def reindex(self, *, progress: Callable[[int, int], None] | None = None) -> Manifest:
        """Rebuild the index from the rows (`steelframe memory reindex`), then catch up."""
        if not self._bound:
            self._identify()  # a rebuild needs no check: it makes the index this database's
        with self.sessions() as session:
            manifest = sync.rebuild(session, self.writer, progress=progress)
        self.sync()
        return manifest

    def merge(self, *, limit: int = 100) -> int:
        """Run due merges (a background job); returns how many ran."""
        self._ensure_bound()
        merged = 0
        while merged < limit and self.writer.merge_once():
            merged += 1
        return merged

    def _unchanged(self) -> Manifest | None:
        """The index's manifest when a sync would change nothing, else None. Read through
        the search side's snapshot (a stat of the manifest while its generation stands);
        any doubt about the index (corrupt, foreign, another analysis) is left to the
        locked sync, which reports or repairs it."""
        try:
            manifest = self.index.snapshot().manifest
        except IndexUnavailable:
            return None
        with self.sessions() as session:
            if sync.pending(session, manifest, now=self.writer.clock()):
                return None
        return manifest

    def merge_due(self) -> bool:
        """Is a merge due in the current generation (its snapshot is the one searches use,
        loaded once per generation rather than on every call)?"""
        self._ensure_bound()
        return bool(plan_merge(self.index.snapshot()))

    def recent(
        self, *, repo: str, source: ChunkSource = ChunkSource.CHAT_SUMMARY, limit: int = 3
    ) -> list[Hit]:
        """Newest chunks of a source, unranked (score 0): the recency fallback.

        Read from the rows once per index generation: a chunk added or replaced changes the
        generation when it is indexed (the next `sync`; a turn syncs before it asks), so
        until then the answer stands. The generation is taken before the rows are read, so
        a sync racing the read only makes the next call read again."""
        key = (repo, source, limit)
        snapshot = self._snapshot_or_none()
        cached = self._recent.get(key)
        if snapshot is not None and cached is not None and cached[0] is snapshot:
            return list(cached[1])
        with self.sessions() as session:
            records = chunks.recent(session, repo=repo, source=source, limit=limit)
        hits = [Hit(record, 0.0) for record in records]
        if snapshot is not None:
            self._recent[key] = (snapshot, tuple(hits))
        return hits

    def _snapshot_or_none(self) -> Snapshot | None:
        if not self._bound:
            return None  # no generation to key on yet: read the rows each time
        try:
            return self.index.snapshot()
        except IndexUnavailable:
            return None

    def distinctive(self, text: str, *, exclude: str = "") -> list[str]:
        """The terms of `text` rare in the index (by idf): what a reply that used it would
        repeat (memory.feedback.rare_terms); the terms of `exclude` (the question) aside."""
        self._ensure_bound()
        return rare_terms(self.analyzer, self.index.snapshot(), text, exclude=exclude)

    def terms(self, text: str) -> set[str]:
        """The analysed terms of `text` (to compare a reply with `distinctive` terms)."""
        return set(self.analyzer.tokens(text))

    def stats(self) -> IndexStats:
        """The index's size and catch-up, as its current generation has them."""
        self._ensure_bound()
        manifest = self.index.snapshot().manifest
        return IndexStats(
            generation=manifest.generation,
            chunks=manifest.live_docs,
            segments=len(manifest.segments),
            tombstones=manifest.dead_count,
            watermark=manifest.watermark,
            gaps=len(manifest.gaps),
        )


def _log_progress(done: int, total: int) -> None:
    """Rebuild progress in the log, once per tenth."""
    tenth = done * 10 // max(total, 1)
    if done >= total or tenth != max(0, done - sync.REBUILD_BATCH) * 10 // max(total, 1):
        log.info("memory index: rebuilding, %d/%d chunks", done, total)
