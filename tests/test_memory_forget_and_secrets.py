"""Memory as an operator meets it: a token pasted into an issue is never stored, indexed or
retrieved; a chunk that is forgotten (a deleted comment, a fact the operator takes back) is
answered by no search, in this process or another, before or after a rebuild."""

from __future__ import annotations

import json
import logging
from collections.abc import Iterator
from pathlib import Path

import pytest
from sqlalchemy import select

from bot.db import Database, upgrade
from bot.filing import MEMORY_LABEL, memory_issue_body
from bot.github.issue_records import Label
from bot.lifecycle.coding import CodingStatus
from bot.lifecycle.memory_task import memory_write, write_memory
from memory import ChunkIn, ChunkSource, Memory
from memory.chunks import MAX_TEXT_CHARS
from memory.manifest import MANIFEST
from memory.models import MemoryChunk

TOKEN = "ghp_" + "A1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q7r8"
MODEL_KEY = "sk-" + "proj_abcdefghijklmnopqrstuvwxyz0123"


@pytest.fixture
def database(any_db_url: str) -> Iterator[Database]:
    database = Database.from_url(any_db_url)
    upgrade(database.engine)
    yield database
    database.dispose()


@pytest.fixture
def memory(database: Database, tmp_path: Path) -> Memory:
    return Memory(tmp_path / "memory", database.session)


def _texts(database: Database) -> list[str]:
    with database.session() as session:
        return list(session.scalars(select(MemoryChunk.text)))


def _comment(text: str, key: str) -> ChunkIn:
    return ChunkIn(text, ChunkSource.COMMENT, "o/r", issue=3, key=key)


def test_a_token_pasted_in_an_issue_is_neither_stored_nor_retrieved(
    memory: Memory, database: Database
) -> None:
    body = (
        f"#12 Deploys fail with 401\n\nI exported GITHUB_TOKEN={TOKEN} and OPENAI_API_KEY="
        f"{MODEL_KEY}\nAuthorization: Bearer abcdefghijklmnop1234 still gets the deploy 401."
    )
    memory.add([ChunkIn(body, ChunkSource.ISSUE, "o/r", issue=12, key="issue:o/r#12")])

    stored = "\n".join(_texts(database))
    assert TOKEN not in stored and MODEL_KEY not in stored and "abcdefghijklmnop1234" not in stored
    hits = memory.search("deploys fail 401", repo="o/r")
    assert [hit.record.issue for hit in hits] == [12]
    shown = hits[0].record.text
    assert "[REDACTED]" in shown and TOKEN not in shown and MODEL_KEY not in shown
    assert memory.search(TOKEN, repo="o/r") == []  # nor found by the token itself


def test_masking_never_makes_text_within_the_limit_fail(memory: Memory) -> None:
    text = "x " * ((MAX_TEXT_CHARS - 20) // 2) + "authorization: y"
    assert len(text) <= MAX_TEXT_CHARS
    memory.add([ChunkIn(text, ChunkSource.COMMENT, "o/r", key="comment:9")])


def test_a_forgotten_chunk_is_answered_by_no_search_and_its_text_is_gone(
    memory: Memory, database: Database, tmp_path: Path
) -> None:
    other = Memory(tmp_path / "memory", database.session)  # another process's reader
    key = "comment:501"
    memory.add(
        [ChunkIn("@ana on #3:\nthe staging bucket is kestrel-7", "comment", "o/r", 3, key=key)]
    )
    memory.add(
        [ChunkIn("@ana on #3:\nthe staging bucket is plover-9", "comment", "o/r", 3, key=key)]
    )
    memory.add([ChunkIn("the staging cluster runs on arm64", ChunkSource.NOTE, "o/r")])
    other.sync()
    assert [h.record.text for h in other.search("plover", repo="o/r")] == [
        "@ana on #3:\nthe staging bucket is plover-9"
    ]
    assert other.search("kestrel", repo="o/r") == []  # an edit replaced the old text

    assert len(memory.retract([key, "comment:404"])) == 1  # an unknown key is skipped

    for reader in (memory, other):
        reader.sync()
        assert reader.search("plover", repo="o/r") == []
        assert reader.search("bucket", repo="o/r") == []
        assert [h.record.text for h in reader.search("staging", repo="o/r")] == [
            "the staging cluster runs on arm64"
        ]
    assert not any("kestrel" in t or "plover" in t for t in _texts(database))

    memory.reindex()
    assert memory.search("bucket", repo="o/r") == []
    # The same comment written again (a new comment id would be a new key anyway) is new.
    memory.add([_comment("@ana on #3:\nthe staging bucket is tern-2", key)])
    other.sync()
    assert [h.record.issue for h in other.search("tern", repo="o/r")] == [3]


def test_the_start_up_rebuild_of_an_old_index_logs_which_index(
    memory: Memory, caplog: pytest.LogCaptureFixture
) -> None:
    memory.add([ChunkIn("a note about deploys", ChunkSource.NOTE, "o/r")])
    manifest = json.loads((memory.root / MANIFEST).read_text())
    manifest["analysis"]["version"] = 1  # as an older Steelframe wrote it
    (memory.root / MANIFEST).write_text(json.dumps(manifest))
    with caplog.at_level(logging.WARNING, logger="memory.service"):
        assert memory.upgrade_index()
    # The operator reading the log learns which data directory was rebuilt (the message
    # had a %s and no argument: the log said "the index in %s").
    assert f"the index in {memory.root} was built with another analysis" in caplog.text


def test_remembering_a_token_commits_neither_it_nor_its_shape_in_the_file_name(
    tmp_path: Path,
) -> None:
    title = f"Remember: the staging deploy token is {TOKEN} and rotates monthly"
    fact = f"the staging deploy token is {TOKEN} and rotates monthly"
    body = memory_issue_body(title, fact)  # what Chat files for "remember that ..."
    write = memory_write(title, body, [Label(name=MEMORY_LABEL)])
    assert write is not None
    assert write_memory(tmp_path, write).status is CodingStatus.DONE
    written = [p.relative_to(tmp_path).as_posix() for p in tmp_path.rglob("*.md")]
    assert written == ["docs/memory/the-staging-deploy-token-is-redacted-and-rotates-monthly.md"]
    assert (tmp_path / written[0]).read_text() == (
        "the staging deploy token is [REDACTED] and rotates monthly\n"
    )


def test_adding_over_a_corrupt_index_stores_once_and_says_so_without_raising(
    memory: Memory, database: Database, caplog: pytest.LogCaptureFixture
) -> None:
    memory.add([ChunkIn("a note about herons", ChunkSource.NOTE, "o/r")])
    (memory.root / MANIFEST).write_text("{")  # a disk that lost a write
    with caplog.at_level(logging.WARNING, logger="memory.service"):
        added = memory.add([ChunkIn("a note about egrets", ChunkSource.NOTE, "o/r")])
    assert added[0].created
    assert "is not caught up: manifest is not valid JSON" in caplog.text
    assert sorted(_texts(database)) == ["a note about egrets", "a note about herons"]
    memory.reindex()  # the repair the search's error names
    assert [h.record.text for h in memory.search("egrets", repo="o/r")] == ["a note about egrets"]
