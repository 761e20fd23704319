"""What a push would publish, searched: the branch's history (every commit ahead of the
base, messages and whole patches) and its changed files, for a value the worker must never
push (the worker's secrets, `bot.lifecycle.redact`). Split from `worktree` (git plumbing).
"""

from __future__ import annotations

import asyncio
import codecs
import os
import stat
from collections.abc import Callable
from pathlib import Path

from bot.lifecycle.worktree import (
    GIT_TIMEOUT_SECONDS,
    SAFE_OPTIONS,
    Worktree,
    WorktreeError,
    git_env,
    tree_git,
)

HISTORY_CHUNK = 1024 * 1024
# How far back a chunk's tail may reach, in multiples of `overlap`: a wrapped value's lines
# hold more characters than the value (a `+` and a line break each); past this, the value
# was padded to hide it, which redaction does not promise to see (docs/lifecycle.md, "What
# the sandbox does not protect against").
TAIL_REACH = 8


async def history_holds(
    tree: Worktree, found: Callable[[str], bool], *, overlap: int, chunk: int = HISTORY_CHUNK
) -> bool:
    """Whether `found` flags anything a push would publish: every commit ahead of the base
    with its message, author and whole patch (binary files as text). Read as git writes it,
    `chunk` bytes at a time, each searched with the lines before it that hold its last
    `overlap` characters (`_tail`: a value cut in two by a chunk's end is still seen, written
    whole or wrapped over lines): memory stays flat whatever the size."""
    process = await asyncio.create_subprocess_exec(
        "git",
        *SAFE_OPTIONS,
        f"--git-dir={tree.git_dir}",
        f"--work-tree={tree.path}",
        *("log", "--patch", "--text", "--format=fuller", "--no-color"),
        *("--no-ext-diff", "--no-textconv", f"origin/{tree.base}..HEAD"),
        cwd=tree.path,
        env=git_env(base_env=tree.base_env),
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
                tail = _tail(text, overlap)
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


def _tail(text: str, overlap: int) -> str:
    """The end of `text` a value cut off by the chunk's end may have started in: whole lines
    back from the end until their content (each line's first character, a patch's prefix,
    and whitespace aside) holds `overlap` characters, so a value wrapped over lines is still
    whole, prefixes and all, with the next chunk; at most TAIL_REACH * `overlap` characters."""
    if overlap <= 0:
        return ""
    floor = max(0, len(text) - TAIL_REACH * overlap)
    start, held = len(text), 0
    while start > floor and held < overlap:
        line = max(text.rfind("\n", floor, start - 1) + 1, floor)
        held += len("".join(text[line + 1 : start].split()))
        start = line
    return text[start:]


async def files_with(tree: Worktree, found: Callable[[str], bool]) -> list[str]:
    """Paths ahead of the base whose current text `found` flags (names only, for the log).
    The names come from the history, the text from the runtime's tree, which the runtime
    may have changed since: each file is read without following a symlink anywhere on its
    path (`read_inside`), so a folder turned into a link reads nothing outside the tree."""
    names = await tree_git(tree, "diff", "--name-only", "-z", f"origin/{tree.base}..HEAD")
    flagged = []
    for name in names.split("\0"):
        text = read_inside(tree.path, name) if name else None
        if text is not None and found(text):
            flagged.append(name)
    return flagged[:20]


_FOLDER = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
# Non-blocking: a FIFO planted in the tree opens at once (and is then refused as no file)
# instead of waiting for a writer.
_FILE = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC


def read_inside(root: Path, name: str) -> str | None:
    """The text of the regular file `name` (relative, `/`-separated) under `root`, or None
    when it is not one: missing, a symlink, or reached through one (each folder is opened
    relative to the one before it with O_NOFOLLOW, so no component is followed, whatever
    changes between the steps), or `..` anywhere."""
    parts = name.split("/")
    if not name or any(part in ("", ".", "..") for part in parts):
        return None
    try:
        folder = os.open(root, _FOLDER)
    except OSError:
        return None
    try:
        for part in parts[:-1]:
            inner = os.open(part, _FOLDER, dir_fd=folder)
            os.close(folder)
            folder = inner
        fd = os.open(parts[-1], _FILE, dir_fd=folder)
    except OSError:  # ELOOP/ENOTDIR: a link on the way; or gone
        return None
    finally:
        os.close(folder)
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        return None
    with os.fdopen(fd, "rb") as file:
        return file.read().decode("utf-8", errors="replace")
