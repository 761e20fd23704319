"""After a push is refused for a secret, the worker names the files that hold it by reading
the runtime's tree: a folder the runtime turned into a symlink must not lead that read out
of the checkout (to a file the worker can read and the runtime cannot)."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

from bot.lifecycle.push_scan import files_with, read_inside
from tests.fakes.git import git_as_tester, local_tree

SECRET = "sk-secret-0123456789abcdef"
OUTSIDE = "the worker's own file, outside the checkout " + SECRET


async def test_a_symlinked_parent_folder_is_not_followed_when_naming_files(
    tmp_path: Path,
) -> None:
    checkout, outside = tmp_path / "checkout", tmp_path / "worker-only"
    checkout.mkdir()
    outside.mkdir()
    (outside / "notes.txt").write_text(OUTSIDE)
    (outside / "deep").mkdir()
    (outside / "deep" / "key.txt").write_text(OUTSIDE)
    git_as_tester(checkout, "init", "--quiet", "--initial-branch=main")
    git_as_tester(checkout, "commit", "--quiet", "--allow-empty", "-m", "base")
    git_as_tester(checkout, "update-ref", "refs/remotes/origin/main", "HEAD")
    for name in ("docs/notes.txt", "a/b/deep/key.txt", "plain.txt", "docs/link.txt"):
        (checkout / name).parent.mkdir(parents=True, exist_ok=True)
        (checkout / name).write_text(f"committed {SECRET}\n")
    git_as_tester(checkout, "add", ".")
    git_as_tester(checkout, "commit", "--quiet", "-m", "notes")
    # After committing, the runtime swaps two folders for links out of the tree.
    shutil.rmtree(checkout / "docs")
    shutil.rmtree(checkout / "a" / "b")
    (checkout / "docs").symlink_to(outside)
    (checkout / "a" / "b").symlink_to(outside)
    read: list[str] = []

    def found(text: str) -> bool:
        read.append(text)
        return SECRET in text

    flagged = await files_with(local_tree(checkout), found)
    assert not [text for text in read if OUTSIDE in text], "read a file outside the checkout"
    assert flagged == ["plain.txt"]  # the file really in the tree is still named


def test_only_regular_files_inside_the_tree_are_read(tmp_path: Path) -> None:
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "ok.txt").write_text("inside")
    (tmp_path / "link.txt").symlink_to(tmp_path / "sub" / "ok.txt")
    os.mkfifo(tmp_path / "pipe")  # opened without waiting for a writer, then refused
    assert read_inside(tmp_path, "sub/ok.txt") == "inside"
    for name in ("link.txt", "pipe", "sub", "../x", "sub/../sub/ok.txt", "/etc/passwd", ""):
        assert read_inside(tmp_path, name) is None, name
