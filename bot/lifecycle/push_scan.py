"""What a push would publish, searched: the branch's history (every commit ahead of the
base, messages and whole patches) and its changed files, for a value the worker must never
push (the worker's secrets, `bot.lifecycle.redact`). Split from `worktree` (git plumbing).
"""

from __future__ import annotations

import asyncio
import codecs
from collections.abc import Callable

from bot.lifecycle.worktree import (
    GIT_TIMEOUT_SECONDS,
    SAFE_OPTIONS,
    Worktree,
    WorktreeError,
    git_env,
    tree_git,
)

HISTORY_CHUNK = 1024 * 1024


async def history_holds(
    tree: Worktree, found: Callable[[str], bool], *, overlap: int, chunk: int = HISTORY_CHUNK
) -> bool:
    """Whether `found` flags anything a push would publish: every commit ahead of the base
    with its message, author and whole patch (binary files as text). Read as git writes it,
    `chunk` bytes at a time, each searched with the last `overlap` characters before it (a
    value cut in two by a chunk's end is still seen): memory stays flat whatever the size."""
    process = await asyncio.create_subprocess_exec(
        "git",
        *SAFE_OPTIONS,
        f"--git-dir={tree.git_dir}",
        f"--work-tree={tree.path}",
        *("log", "--patch", "--text", "--format=fuller", "--no-color"),
        *("--no-ext-diff", "--no-textconv", f"origin/{tree.base}..HEAD"),
        cwd=tree.path,
        env=git_env(),
        stdin=asyncio.subprocess.DEVNULL,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.DEVNULL,
    )
    assert process.stdout is not None
    try:
        async with asyncio.timeout(GIT_TIMEOUT_SECONDS):
            decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
            tail = ""
            while piece := await process.stdout.read(chunk):
                text = tail + decoder.decode(piece)
                if found(text):
                    return True
                tail = text[-overlap:] if overlap > 0 else ""
            if found(tail + decoder.decode(b"", final=True)):
                return True
            if await process.wait() != 0:
                raise WorktreeError("git log failed")
            return False
    except TimeoutError:
        raise WorktreeError("git log timed out") from None
    finally:
        if process.returncode is None:
            process.kill()
            await process.wait()


async def files_with(tree: Worktree, found: Callable[[str], bool]) -> list[str]:
    """Paths ahead of the base whose current text `found` flags (names only, for the log)."""
    names = await tree_git(tree, "diff", "--name-only", f"origin/{tree.base}..HEAD")
    flagged = []
    for name in names.splitlines():
        path = tree.path / name
        try:
            if path.is_file() and not path.is_symlink() and found(path.read_text(errors="replace")):
                flagged.append(name)
        except OSError:
            continue
    return flagged[:20]
