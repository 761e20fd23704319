"""Committed memory: docs/memory/*.md in the checkout, in path order, within a budget."""

from __future__ import annotations

from pathlib import Path

from memory import read_committed
from memory.committed import MIN_PARTIAL


def _write(checkout: Path, name: str, text: str) -> Path:
    path = checkout / "docs" / "memory" / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


def test_files_come_in_path_order_and_only_markdown(tmp_path: Path) -> None:
    _write(tmp_path, "02-second.md", "second fact")
    _write(tmp_path, "01-first.md", "first fact\n")
    _write(tmp_path, "notes.txt", "not markdown")
    _write(tmp_path, "sub/03-nested.md", "nested fact")
    _write(tmp_path, "empty.md", "  \n")
    memory = read_committed(tmp_path)
    assert [(f.path, f.text) for f in memory.files] == [
        ("docs/memory/01-first.md", "first fact"),
        ("docs/memory/02-second.md", "second fact"),
        ("docs/memory/sub/03-nested.md", "nested fact"),
    ]


def test_budget_cuts_the_first_file_that_does_not_fit_and_omits_the_rest(tmp_path: Path) -> None:
    _write(tmp_path, "a.md", "A" * 300)
    _write(tmp_path, "b.md", "B" * 1000)
    _write(tmp_path, "c.md", "C" * 10)
    memory = read_committed(tmp_path, budget=300 + MIN_PARTIAL + 50)
    assert [f.path for f in memory.files] == ["docs/memory/a.md", "docs/memory/b.md"]
    cut = memory.files[1]
    assert cut.truncated and cut.text == "B" * (MIN_PARTIAL + 50) + "…"
    assert memory.omitted == ["docs/memory/c.md"]
    tiny = read_committed(tmp_path, budget=310)
    assert [f.path for f in tiny.files] == ["docs/memory/a.md"]
    assert tiny.omitted == ["docs/memory/b.md", "docs/memory/c.md"]


def test_a_symlink_out_of_the_folder_is_skipped(tmp_path: Path) -> None:
    secret = tmp_path / "secret.md"
    secret.write_text("do not read me")
    _write(tmp_path / "checkout", "ok.md", "fine")
    (tmp_path / "checkout" / "docs" / "memory" / "escape.md").symlink_to(secret)
    memory = read_committed(tmp_path / "checkout")
    assert [f.text for f in memory.files] == ["fine"]
    assert memory.skipped == ["docs/memory/escape.md"]


def test_no_folder_means_no_committed_memory(tmp_path: Path) -> None:
    memory = read_committed(tmp_path / "nowhere")
    assert memory.files == [] and memory.omitted == [] and memory.skipped == []
