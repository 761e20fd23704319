"""A forgotten chunk's text leaves the index's files, not only its answers: the segment that
holds it is rewritten without it when the forget is caught up (memory.writer.plan_merge,
"scrubbed" tombstones), instead of staying on disk until the segment's next merge, which a
large segment may not see for months. An edit's earlier version, whose text the database
keeps too, is left to the ordinary merge."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from sqlalchemy import select

from bot.db import Database
from memory import ChunkIn, ChunkSource, Memory
from memory import chunks as chunk_rows
from memory.models import MemoryChunk
from memory.snapshot import Tombstones


@pytest.fixture
def root(tmp_path: Path) -> Path:
    return tmp_path / "memory"


def _on_disk(root: Path, words: str) -> list[str]:
    """The index files holding `words` (in any file of the folder, whatever its format)."""
    needle = words.encode()
    return sorted(p.name for p in root.iterdir() if p.is_file() and needle in p.read_bytes())


def _segments(root: Path) -> list[str]:
    return sorted(p.name for p in root.iterdir() if p.name.startswith("seg-"))


def _notes(count: int) -> list[ChunkIn]:
    return [
        ChunkIn(f"runbook step {n}: restart the ingest worker", ChunkSource.NOTE, "o/r")
        for n in range(count)
    ]


def test_forgetting_a_chunk_takes_its_text_out_of_the_segment_files(
    any_db: Database, root: Path
) -> None:
    memory = Memory(root, any_db.session)
    key = "comment:77"
    comment = ChunkIn("the vault passphrase is kestrel-seven", ChunkSource.COMMENT, "o/r", 3)
    memory.add([*_notes(40), ChunkIn(comment.text, comment.source, "o/r", 3, key=key)])
    assert _on_disk(root, "kestrel-seven")  # one segment of 41 chunks holds it

    forgotten = memory.forget_key(key)

    assert forgotten is not None
    assert _on_disk(root, "kestrel-seven") == []
    assert memory.search("kestrel passphrase", repo="o/r") == []
    assert len(memory.search("restart ingest worker", repo="o/r", k=50)) == 40
    assert memory.stats().chunks == 40


def test_an_edit_keeps_its_earlier_text_for_the_merge_and_a_retraction_takes_every_version(
    any_db: Database, root: Path
) -> None:
    memory = Memory(root, any_db.session)
    key = "comment:78"
    memory.add([*_notes(20), ChunkIn("bucket is kestrel-one", "comment", "o/r", 3, key=key)])
    memory.add([*_notes(20), ChunkIn("bucket is plover-two", "comment", "o/r", 3, key=key)])
    before = _segments(root)

    assert memory.search("kestrel", repo="o/r") == []  # the edit replaced it in answers
    # The database keeps the earlier version's text, and so does its segment, until a merge.
    assert _on_disk(root, "kestrel-one") and _segments(root) == before

    assert len(memory.retract([key])) == 1
    assert _on_disk(root, "kestrel-one") == [] and _on_disk(root, "plover-two") == []
    assert len(memory.search("restart ingest worker", repo="o/r", k=50)) == 40


def test_a_forget_another_process_committed_is_taken_off_disk_by_the_next_sync_and_merge(
    any_db: Database, root: Path
) -> None:
    """The webhook handler forgets a deleted comment in its own transaction; the index
    learns of it at any process's next sync, and the merge due then rewrites the segment."""
    memory = Memory(root, any_db.session)
    memory.add([*_notes(30), ChunkIn("deploy key is tern-three", "comment", "o/r", 5, key="c:9")])
    with any_db.session() as session:
        assert chunk_rows.retract(session, "c:9") is not None
    assert _on_disk(root, "tern-three")

    memory.sync()
    assert memory.merge_due()
    assert memory.merge() >= 1

    assert _on_disk(root, "tern-three") == []
    assert len(memory.search("restart ingest worker", repo="o/r", k=50)) == 30


def test_tombstones_written_before_scrubbing_existed_still_load(tmp_path: Path) -> None:
    path = tmp_path / "dead-00000001-abcdef.npz"
    ids, terms, counts = (np.asarray(v, dtype=np.int64) for v in ([3, 9], [1, 4], [2, 1]))
    with open(path, "wb") as handle:
        np.savez(handle, ids=ids, terms=terms, counts=counts)

    loaded = Tombstones.load(path)

    assert loaded.ids.tolist() == [3, 9] and loaded.scrubbed.tolist() == []


def test_the_index_keeps_no_tombstone_of_a_forgotten_chunk_once_its_segment_is_rewritten(
    any_db: Database, root: Path
) -> None:
    memory = Memory(root, any_db.session)
    memory.add([*_notes(10), ChunkIn("pin is wren-four", "comment", "o/r", 2, key="c:4")])
    memory.forget_key("c:4")
    stats = memory.stats()
    assert (stats.chunks, stats.tombstones, stats.segments) == (10, 0, 1)
    assert not [p for p in root.iterdir() if p.name.startswith("dead-")]


def test_a_chunk_masked_since_it_was_indexed_leaves_the_disk_with_the_next_merge(
    any_db: Database, root: Path
) -> None:
    """As migration 0028 masks a token stored before masking existed: the old row, masked
    in place, stops being live and a live row with the masked text replaces it."""
    memory = Memory(root, any_db.session)
    memory.add(
        [*_notes(40), ChunkIn("deploy with key sekrit-five", "issue", "o/r", 12, key="i:12")]
    )
    with any_db.session() as session:
        old = session.scalars(select(MemoryChunk).where(MemoryChunk.key == "i:12")).one()
        old.live, old.text = False, "deploy with key [REDACTED]"
        session.flush()
        session.add(
            MemoryChunk(
                key=old.key,
                source=old.source,
                repo=old.repo,
                issue=old.issue,
                paths=[],
                text=old.text,
                created_at=old.created_at,
                live=True,
                replaces=old.id,
            )
        )

    memory.sync()
    assert memory.merge() >= 1

    assert _on_disk(root, "sekrit-five") == []
    assert [h.record.text for h in memory.search("deploy key", repo="o/r")] == [
        "deploy with key [REDACTED]"
    ]


def test_a_chunk_forgotten_before_scrubbing_existed_leaves_the_disk_at_the_next_start(
    any_db: Database, root: Path
) -> None:
    """An index whose tombstones file predates scrubbed tombstones: the forgotten chunk's
    text is still in its segment. The next process to bind the index (a start, a `memory`
    command) asks the database once and rewrites the segment without it."""
    memory = Memory(root, any_db.session)
    memory.add([*_notes(40), ChunkIn("the old pin is heron-six", "comment", "o/r", 4, key="c:6")])
    with any_db.session() as session:
        assert chunk_rows.retract(session, "c:6") is not None
    memory.sync()  # tombstoned (and, today, marked scrubbed): written back the old way below
    [dead] = [p for p in root.iterdir() if p.name.startswith("dead-")]
    with np.load(dead) as data:
        old_form = {name: data[name] for name in ("ids", "terms", "counts")}
    with open(dead, "wb") as handle:
        np.savez(handle, **old_form)
    assert _on_disk(root, "heron-six")

    Memory(root, any_db.session).bind()  # the next start

    assert _on_disk(root, "heron-six") == []
    assert len(memory.search("restart ingest worker", repo="o/r", k=50)) == 40
    assert not [p for p in root.iterdir() if p.name.startswith("dead-")]
