"""The chunk store on SQLite and PostgreSQL, and the index catching up from its rows."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import inspect, select

from bot.db import Database, upgrade
from memory import ChunkError, ChunkIn, ChunkSource, Memory, add_chunks
from memory.errors import IndexIncompatible
from memory.manifest import MANIFEST
from memory.models import MemoryChunk
from memory.writer import MERGE_FACTOR


@pytest.fixture
def database(any_db_url: str) -> Iterator[Database]:
    database = Database.from_url(any_db_url)
    upgrade(database.engine)
    yield database
    database.dispose()


@pytest.fixture
def memory(database: Database, tmp_path: Path) -> Memory:
    return Memory(tmp_path / "memory", database.session)


def _chunk(text: str, **kwargs: Any) -> ChunkIn:
    return ChunkIn(
        text=text,
        source=kwargs.pop("source", ChunkSource.NOTE),
        repo=kwargs.pop("repo", "o/r"),
        **kwargs,
    )


def test_migration_creates_the_chunk_table(database: Database) -> None:
    table = inspect(database.engine)
    assert "memory_chunks" in table.get_table_names()
    indexes = {i["name"]: i for i in table.get_indexes("memory_chunks")}
    assert indexes["uq_memory_chunks_live_key"]["unique"]


def test_added_chunks_keep_their_provenance(memory: Memory, database: Database) -> None:
    added = memory.add(
        [
            _chunk(
                "worker ran tests",
                source="worker_session",
                issue=7,
                session_id="w1",
                paths=["a.py", "b/c.py"],
            )
        ]
    )
    with database.session() as session:
        row = session.get(MemoryChunk, added[0].id)
        assert row is not None
        assert (row.source, row.repo, row.issue, row.session_id, row.paths, row.live) == (
            "worker_session",
            "o/r",
            7,
            "w1",
            ["a.py", "b/c.py"],
            True,
        )
        assert row.created_at.tzinfo is UTC
    hit = memory.search("worker tests", repo="o/r")[0]
    assert hit.record.paths == ("a.py", "b/c.py") and hit.record.issue == 7


def test_same_key_same_content_is_stored_once(memory: Memory, database: Database) -> None:
    first = memory.add([_chunk("issue body", key="issue:o/r#3", issue=3)])[0]
    again = memory.add([_chunk("issue body", key="issue:o/r#3", issue=3)])[0]
    assert again.id == first.id and not again.created
    with database.session() as session:
        assert len(session.scalars(select(MemoryChunk)).all()) == 1
    assert len(memory.search("issue body", repo="o/r")) == 1


def test_same_key_new_content_replaces_the_chunk_everywhere(
    memory: Memory, database: Database
) -> None:
    first = memory.add([_chunk("comment says alpha", key="comment:1")])[0]
    second = memory.add([_chunk("comment says omega", key="comment:1")])[0]
    assert second.replaced == first.id
    with database.session() as session:
        live = {row.id: row.live for row in session.scalars(select(MemoryChunk))}
    assert live == {first.id: False, second.id: True}
    assert memory.search("alpha", repo="o/r") == []
    assert [h.chunk_id for h in memory.search("omega comment", repo="o/r")] == [second.id]


@pytest.mark.parametrize(
    ("chunk", "message"),
    [
        (ChunkIn("", "note", "o/r"), "text is required"),
        (ChunkIn("   \n", "note", "o/r"), "text is required"),
        (ChunkIn("x" * 50_001, "note", "o/r"), "longer than"),
        (ChunkIn("text", "gossip", "o/r"), "source 'gossip'"),
        (ChunkIn("text", "note", "not-a-repo"), "owner/name"),
        (ChunkIn("text", "note", "o/r", issue=0), "positive integer"),
        (ChunkIn("text", "note", "o/r", issue=True), "positive integer"),
        (ChunkIn("text", "note", "o/r", paths=["ok", ""]), "paths"),
        (ChunkIn("text", "note", "o/r", session_id="s" * 65), "session_id"),
    ],
)
def test_invalid_chunks_are_rejected_and_nothing_is_written(
    database: Database, chunk: ChunkIn, message: str
) -> None:
    with pytest.raises(ChunkError, match=message), database.session() as session:
        add_chunks(session, [ChunkIn("a valid one first", "note", "o/r"), chunk])
    with database.session() as session:
        assert session.scalars(select(MemoryChunk)).all() == []


def test_sync_indexes_rows_written_by_another_part(memory: Memory, database: Database) -> None:
    with database.session() as session:  # e.g. a webhook handler, in its own transaction
        add_chunks(session, [_chunk("webhook stored this issue text", source="issue", issue=4)])
    assert memory.search("webhook issue", repo="o/r") == []
    report = memory.sync()
    assert (report.added, report.behind) == (1, False)
    assert memory.search("webhook issue", repo="o/r")[0].record.issue == 4
    assert memory.sync().added == 0  # nothing twice


def test_two_processes_syncing_at_once_index_each_row_once(
    database: Database, tmp_path: Path
) -> None:
    with database.session() as session:
        add_chunks(session, [_chunk(f"shared row {i}") for i in range(40)])
    first = Memory(tmp_path / "memory", database.session)
    second = Memory(tmp_path / "memory", database.session)
    barrier = threading.Barrier(2)
    reports: list[int] = []

    def run(memory: Memory) -> None:
        barrier.wait()
        reports.append(memory.sync(limit=7).added + memory.sync().added)

    threads = [threading.Thread(target=run, args=(m,)) for m in (first, second)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert sum(reports) == 40
    assert first.stats().chunks == 40
    assert len(second.search("shared row", repo="o/r", k=100)) == 40


def test_an_id_committed_late_is_picked_up_from_the_gaps(
    memory: Memory, database: Database
) -> None:
    now = datetime.now(UTC)
    with database.session() as session:
        for chunk_id in (1, 2, 4):  # id 3 is still in an open transaction elsewhere
            session.add(
                MemoryChunk(
                    id=chunk_id,
                    source="note",
                    repo="o/r",
                    paths=[],
                    text=f"gap test {chunk_id}",
                    created_at=now,
                    live=True,
                )
            )
    memory.sync()
    assert memory.stats().gaps == 1 and memory.stats().watermark == 4
    with database.session() as session:
        session.add(
            MemoryChunk(
                id=3,
                source="note",
                repo="o/r",
                paths=[],
                text="gap test late arrival",
                created_at=now,
                live=True,
            )
        )
    assert memory.sync().added == 1
    assert memory.stats().gaps == 0
    assert memory.search("late arrival", repo="o/r")[0].chunk_id == 3


def test_rebuild_equals_incremental_exactly(
    memory: Memory, database: Database, tmp_path: Path
) -> None:
    topics = ["deploy pipeline", "redis workers", "flaky tests", "docker image", "token rotation"]
    for batch in range(MERGE_FACTOR + 3):  # enough small segments for merges
        memory.add(
            [
                _chunk(
                    f"{topics[(batch + i) % 5]} note {batch}-{i} with words {i * batch}",
                    repo="o/r" if i % 3 else "o/other",
                    issue=(i % 4) or None,
                )
                for i in range(6)
            ]
        )
        if batch % 3 == 2:  # edits replace earlier chunks (tombstones)
            memory.add(
                [
                    _chunk(
                        f"edited comment {batch} about {topics[batch % 5]}",
                        key=f"comment:{batch % 2}",
                    )
                ]
            )
    rebuilt = Memory(tmp_path / "rebuilt", database.session)
    rebuilt.reindex()
    before = memory.stats()
    assert before.tombstones > 0 and before.segments > MERGE_FACTOR
    assert rebuilt.stats().segments == 1 and rebuilt.stats().tombstones == 0
    _assert_same_results(memory, rebuilt, [*topics, "edited comment", "words 12", "note 3-4"])
    assert memory.merge() >= 1
    assert memory.stats().segments < before.segments
    _assert_same_results(memory, rebuilt, [*topics, "edited comment", "words 12", "note 3-4"])


def _assert_same_results(incremental: Memory, rebuilt: Memory, queries: list[str]) -> None:
    assert incremental.stats().chunks == rebuilt.stats().chunks
    for query in queries:
        for repo, focus in ((None, None), ("o/r", None), ("o/r", 2)):
            ours = [
                (h.chunk_id, h.score)
                for h in incremental.search(query, repo=repo, focus=focus, k=50)
            ]
            theirs = [
                (h.chunk_id, h.score) for h in rebuilt.search(query, repo=repo, focus=focus, k=50)
            ]
            assert ours and ours == theirs, (query, repo, focus)


def test_reindex_repairs_a_corrupt_index_and_reports_progress(memory: Memory) -> None:
    memory.add([_chunk(f"row number {i}") for i in range(12)])
    (memory.root / MANIFEST).write_text("garbage")
    with pytest.raises(Exception, match="not valid JSON"):
        memory.search("row", repo="o/r")
    steps: list[tuple[int, int]] = []
    memory.reindex(progress=lambda done, total: steps.append((done, total)))
    assert steps[0] == (0, 12) and steps[-1] == (12, 12)
    assert len(memory.search("row number", repo="o/r", k=20)) == 12


def test_recent_returns_the_newest_summaries_of_the_repo(memory: Memory) -> None:
    for i in range(5):
        memory.add([_chunk(f"summary {i}", source="chat_summary", session_id=f"s{i}")])
    memory.add([_chunk("other repo summary", source="chat_summary", repo="o/other")])
    memory.add([_chunk("a note", source="note")])
    recent = memory.recent(repo="o/r", limit=3)
    assert [h.record.text for h in recent] == ["summary 4", "summary 3", "summary 2"]


def test_an_index_of_an_older_analysis_is_rebuilt_by_the_next_sync(memory: Memory) -> None:
    memory.add([_chunk(f"deployed build {i}") for i in range(7)])
    manifest = json.loads((memory.root / MANIFEST).read_text())
    manifest["analysis"]["version"] = 1  # as an older Steelframe wrote it
    (memory.root / MANIFEST).write_text(json.dumps(manifest))
    with pytest.raises(IndexIncompatible, match="reindex"):
        memory.search("deploying builds", repo="o/r")
    memory.add([_chunk("deploys of build 8")])  # its sync meets the old index first
    assert len(memory.search("deploying builds", repo="o/r", k=20)) == 8
    current = json.loads((memory.root / MANIFEST).read_text())["analysis"]
    assert current == memory.analyzer.signature


def test_start_up_rebuilds_an_old_index_with_progress(memory: Memory) -> None:
    memory.add([_chunk(f"row {i}") for i in range(6)])
    assert memory.upgrade_index() is False  # current: nothing to do
    manifest = json.loads((memory.root / MANIFEST).read_text())
    manifest["analysis"]["version"] = 1
    (memory.root / MANIFEST).write_text(json.dumps(manifest))
    steps: list[tuple[int, int]] = []
    assert memory.upgrade_index(progress=lambda done, total: steps.append((done, total)))
    assert steps[0] == (0, 6) and steps[-1] == (6, 6)
    assert len(memory.search("row", repo="o/r", k=20)) == 6


def test_pull_request_closing_references_are_recorded_and_survive_merges(
    memory: Memory,
) -> None:
    memory.add([_chunk("#12 fees posted twice", source="issue", issue=12)])
    for batch in range(MERGE_FACTOR):
        memory.add(
            [
                _chunk(
                    f"PR #{100 + batch} change {batch}\n\nFixes #12, closes o/r#{20 + batch}",
                    source="pull_request",
                    issue=100 + batch,
                )
            ]
        )
    memory.add([_chunk("A comment saying fixes #12 is not a pull request", issue=12)])
    before = [r.issue for r in memory.linking([12], repo="o/r")]
    assert before == [100 + b for b in range(MERGE_FACTOR)]
    assert [r.links for r in memory.linking([21], repo="o/r")] == [(12, 21)]
    assert memory.merge() >= 1
    assert [r.issue for r in memory.linking([12], repo="o/r")] == before
    assert [r.source for r in memory.about([12], repo="o/r")] == ["issue", "note"]
    hits = memory.search("change", repo="o/r", within={101, 103}, k=10)
    assert sorted(h.record.issue for h in hits) == [101, 103]
    assert memory.linking([12], repo="other/repo") == []
    # by number: which issues each PR closes (a comment on #101 belongs to #12's thread)
    assert memory.closes([12, 101, 102, 999], repo="o/r") == {101: (12, 21), 102: (12, 22)}
    assert memory.closes([101], repo="other/repo") == {}


def test_a_pull_request_closing_another_repositorys_issue_is_not_linked_to_this_ones(
    memory: Memory,
) -> None:
    memory.add([_chunk("#12 fees posted twice", source="issue", issue=12)])
    memory.add(
        [_chunk("PR #30 bump the library\n\nFixes other/lib#12", source="pull_request", issue=30)]
    )
    assert memory.linking([12], repo="o/r") == []
    assert memory.closes([30], repo="o/r") == {}


def test_the_memory_schema_loads_without_the_index_or_scikit_learn() -> None:
    import memory

    assert set(memory.__all__) == set(memory._EXPORTS)
    probe = "import sys, memory.models; print('sklearn' in sys.modules)"
    result = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, timeout=60, check=True
    )
    assert result.stdout.strip() == "False"
