"""`GET /repos/{owner}/{repo}/contents/{path}`: a file or a directory of a sandbox repository's
bare git repository, read at a ref, in GitHub's default (`application/json`) shapes: a file is
an object with its base64 content, a directory a list of entries without content."""

from __future__ import annotations

import base64
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from github_sandbox.shapes import Shapes
from github_sandbox.state import Repo

# git's tree entry types -> GitHub's content types (a gitlink is a submodule).
_KINDS = {"blob": "file", "tree": "dir", "commit": "submodule"}
SYMLINK_MODE = "120000"


@dataclass(frozen=True)
class Entry:
    kind: str  # file | dir | symlink | submodule
    sha: str
    size: int
    path: str

    @property
    def name(self) -> str:
        return self.path.rsplit("/", 1)[-1]


def _git(path: Path, *args: str) -> bytes | None:
    result = subprocess.run(["git", "-C", str(path), *args], capture_output=True, check=False)
    return result.stdout if result.returncode == 0 else None


def _entries(git_path: Path, ref: str, prefix: str) -> list[Entry]:
    """`git ls-tree -l` of `ref:prefix` (prefix "" or ending in "/"), -z separated."""
    pathspec = ["--", prefix] if prefix else []  # an empty pathspec matches nothing
    listed = _git(git_path, "ls-tree", "-z", "-l", f"{ref}^{{tree}}", *pathspec)
    entries = []
    for record in (listed or b"").split(b"\0"):
        if not record:
            continue
        meta, _, name = record.decode(errors="replace").partition("\t")
        mode, kind, sha, size = meta.split()
        shown = "symlink" if mode == SYMLINK_MODE else _KINDS.get(kind, "file")
        entries.append(Entry(shown, sha, 0 if size == "-" else int(size), name))
    return entries


def lookup(git_path: Path, ref: str, path: str) -> Entry | list[Entry] | None:
    """The entry at `path` (a file) or the entries under it (a directory); None when the
    ref or the path does not exist."""
    if ref.startswith("-"):  # would read as an option to git, and names no ref
        return None
    path = path.strip("/")
    if not path:
        return _entries(git_path, ref, "")
    found = [e for e in _entries(git_path, ref, path) if e.path == path]
    if not found:
        return None
    if found[0].kind == "dir":
        return _entries(git_path, ref, path + "/")
    return found[0]


def blob(git_path: Path, sha: str) -> bytes:
    return _git(git_path, "cat-file", "blob", sha) or b""


def entry_shape(shapes: Shapes, repo: Repo, ref: str, entry: Entry) -> dict[str, Any]:
    api = f"{shapes.api}/repos/{repo.full_name}"
    html_kind = "tree" if entry.kind == "dir" else "blob"
    git_kind = "trees" if entry.kind == "dir" else "blobs"
    url = f"{api}/contents/{entry.path}?ref={ref}"
    html = f"{shapes.html}/{repo.full_name}/{html_kind}/{ref}/{entry.path}"
    git_url = f"{api}/git/{git_kind}/{entry.sha}"
    download = (
        None if entry.kind == "dir" else f"{shapes.html}/raw/{repo.full_name}/{ref}/{entry.path}"
    )
    return {
        "type": entry.kind,
        "size": entry.size,
        "name": entry.name,
        "path": entry.path,
        "sha": entry.sha,
        "url": url,
        "git_url": git_url,
        "html_url": html,
        "download_url": download,
        "_links": {"self": url, "git": git_url, "html": html},
    }


def file_shape(shapes: Shapes, repo: Repo, ref: str, entry: Entry, data: bytes) -> dict[str, Any]:
    encoded = base64.b64encode(data).decode()
    # GitHub wraps the base64 text at 60 characters, each line ending in a newline.
    wrapped = "".join(encoded[i : i + 60] + "\n" for i in range(0, len(encoded), 60))
    return {**entry_shape(shapes, repo, ref, entry), "content": wrapped, "encoding": "base64"}
