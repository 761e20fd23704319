"""A memory task writes its fact under docs/memory/ and nowhere else, whatever the
repository holds."""

from __future__ import annotations

from pathlib import Path

from bot.lifecycle.coding import CodingStatus
from bot.lifecycle.memory_task import MemoryWrite, write_memory

FACT = MemoryWrite(path="docs/memory/deploys.md", fact="We deploy on Tuesdays.", title="t")


def test_the_fact_is_written_once(tmp_path: Path) -> None:
    first = write_memory(tmp_path, FACT)
    assert first.status is CodingStatus.DONE
    assert (tmp_path / FACT.path).read_text() == "We deploy on Tuesdays.\n"
    assert "already holds" in write_memory(tmp_path, FACT).summary


def test_a_committed_symlink_on_the_way_is_refused_not_followed(tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    repo = tmp_path / "repo"
    (repo / "docs").mkdir(parents=True)
    (repo / "docs" / "memory").symlink_to(outside)  # what a hostile repository could commit
    outcome = write_memory(repo, FACT)
    assert outcome.status is CodingStatus.ERROR and "symbolic link" in outcome.error
    assert list(outside.iterdir()) == []
