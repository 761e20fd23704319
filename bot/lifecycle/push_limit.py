"""The largest change a run may push, measured by git without reading any file.

A runtime can write a file of any size; pushing it made the worker hold it in memory several
times over (a 300 MiB file grew the worker by ~920 MB, reading the patch for the secret
check). Before anything reads the branch's contents, git lists the objects the push would
send (`rev-list --objects HEAD --not origin/BASE`) and `cat-file --batch-check` says each
one's type and size: the worker reads one short line per object, never a blob. Over the
limit, nothing is pushed and the task fails naming the file (docs/lifecycle.md, "Limits").
"""

from __future__ import annotations

from dataclasses import dataclass

from bot.lifecycle.worktree import Worktree, git, tree_git

MIB = 1024 * 1024
DEFAULT_MAX_BYTES = 50 * MIB
DEFAULT_MAX_FILE_BYTES = 20 * MIB
# One line per object: "<type> <size> <path>" (the path after the object name, `%(rest)`).
BATCH_CHECK = "--batch-check=%(objecttype) %(objectsize) %(rest)"


@dataclass(frozen=True)
class PushLimits:
    max_bytes: int = DEFAULT_MAX_BYTES
    max_file_bytes: int = DEFAULT_MAX_FILE_BYTES


@dataclass(frozen=True)
class ChangeSize:
    """The blobs a push would add: their bytes in total, and the largest with its path."""

    total: int = 0
    files: int = 0
    largest: int = 0
    largest_path: str = ""


def sized(batch_check: str) -> ChangeSize:
    """The `ChangeSize` of `cat-file --batch-check` lines in `BATCH_CHECK`'s format."""
    total = files = largest = 0
    largest_path = ""
    for line in batch_check.splitlines():
        kind, _, rest = line.partition(" ")
        if kind != "blob":
            continue  # commits and trees: small, and not what a runtime chooses the size of
        size_text, _, path = rest.partition(" ")
        size = int(size_text)
        total += size
        files += 1
        if size > largest:
            largest, largest_path = size, path
    return ChangeSize(total=total, files=files, largest=largest, largest_path=largest_path)


async def measure(tree: Worktree) -> ChangeSize:
    """What the commits ahead of the base add, as git counts it (nothing read here)."""
    ahead = ("rev-list", "--objects", "HEAD", "--not", f"origin/{tree.base}")
    objects = await tree_git(tree, *ahead)
    if not objects:
        return ChangeSize()
    checked = await git(
        tree.path,
        "cat-file",
        BATCH_CHECK,
        git_dir=tree.git_dir,
        stdin=objects.encode(),
        base_env=tree.base_env,
    )
    return sized(checked)


def refusal(size: ChangeSize, limits: PushLimits) -> str | None:
    """Why the change may not be pushed (one line naming the file), or None."""
    if size.largest > limits.max_file_bytes:
        return (
            f"the change was not pushed: {size.largest_path} is {_mib(size.largest)}, over the "
            f"limit of {_mib(limits.max_file_bytes)} for one file"
        )
    if size.total > limits.max_bytes:
        return (
            f"the change was not pushed: its {size.files} files come to {_mib(size.total)}, "
            f"over the limit of {_mib(limits.max_bytes)} (the largest: {size.largest_path}, "
            f"{_mib(size.largest)})"
        )
    return None


def _mib(size: int) -> str:
    return f"{size / MIB:.1f} MiB"
