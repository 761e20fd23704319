"""Bare git repositories on disk behind the sandbox's repositories (clone, push, branches)."""

from __future__ import annotations

import os
import re
import subprocess
from dataclasses import dataclass
from pathlib import Path

SANDBOX_AUTHOR = {
    "GIT_AUTHOR_NAME": "Steelframe Sandbox",
    "GIT_AUTHOR_EMAIL": "sandbox@steelframe.invalid",
    "GIT_COMMITTER_NAME": "Steelframe Sandbox",
    "GIT_COMMITTER_EMAIL": "sandbox@steelframe.invalid",
}


def _git(path: Path, *args: str, stdin: str | None = None) -> str:
    env = {**os.environ, **SANDBOX_AUTHOR, "GIT_CONFIG_NOSYSTEM": "1"}
    result = subprocess.run(
        ["git", "-C", str(path), *args],
        input=stdin,
        capture_output=True,
        text=True,
        env=env,
        check=False,
    )
    if result.returncode != 0:
        raise RuntimeError(f"git {args[0]} failed in {path}: {result.stderr.strip()}")
    return result.stdout.strip()


def init_bare(path: Path, *, branch: str, readme: str) -> str:
    """A bare repository at `path` whose `branch` holds one commit with README.md.

    Built with plumbing commands, so no working tree or user git config is needed.
    Returns the commit sha. An existing repository is left as it is."""
    if (path / "HEAD").exists():
        return branch_sha(path, branch) or ""
    path.mkdir(parents=True, exist_ok=True)
    _git(path, "init", "--quiet", "--bare", f"--initial-branch={branch}")
    blob = _git(path, "hash-object", "-w", "--stdin", stdin=readme)
    tree = _git(path, "mktree", stdin=f"100644 blob {blob}\tREADME.md\n")
    commit = _git(path, "commit-tree", tree, "-m", "Initial commit")
    _git(path, "update-ref", f"refs/heads/{branch}", commit)
    # Pushes (git_http, or file:// through the control API) need no hooks; allow pushing
    # to the checked-out branch name.
    _git(path, "config", "receive.denyCurrentBranch", "ignore")
    return commit


def branch_sha(path: Path, branch: str) -> str | None:
    try:
        return _git(path, "rev-parse", "--verify", "--quiet", f"refs/heads/{branch}^{{commit}}")
    except RuntimeError:
        return None


def branch_heads(path: Path) -> dict[str, str]:
    """Every branch's commit, by branch name."""
    try:
        raw = _git(path, "for-each-ref", "--format=%(refname:short) %(objectname)", "refs/heads")
    except RuntimeError:
        return {}
    return dict(line.split(" ", 1) for line in raw.splitlines() if " " in line)


def fast_forward(path: Path, branch: str, sha: str) -> bool:
    """Move `branch` to `sha` when that is a fast-forward (a merge in the sandbox)."""
    current = branch_sha(path, branch)
    if current is None:
        return False
    try:
        _git(path, "merge-base", "--is-ancestor", current, sha)
    except RuntimeError:
        return False
    _git(path, "update-ref", f"refs/heads/{branch}", sha, current)
    return True


def _git_status(path: Path, *args: str) -> tuple[int, str]:
    """`git args` in `path`: its exit status and output (for commands whose status is an
    answer, not a failure)."""
    env = {**os.environ, **SANDBOX_AUTHOR, "GIT_CONFIG_NOSYSTEM": "1"}
    result = subprocess.run(
        ["git", "-C", str(path), *args], capture_output=True, text=True, env=env, check=False
    )
    return result.returncode, result.stdout.strip()


@dataclass(frozen=True)
class MergeCheck:
    """Whether `head` merges into `base` (as GitHub's test merge tells it)."""

    base: str
    head: str
    conflicted: bool
    behind: bool  # `base` has commits `head` lacks
    tree: str  # the merged tree (with conflict markers when conflicted)
    conflicts: tuple[str, ...] = ()


def merge_check(path: Path, base: str, head: str) -> MergeCheck:
    """`git merge-tree --write-tree` (git >= 2.38): status 0 merges clean, 1 conflicts
    (then the conflicted files follow the tree's id); anything else is a failure."""
    status, out = _git_status(
        path, "merge-tree", "--write-tree", "--name-only", "--no-messages", base, head
    )
    if status not in (0, 1):
        raise RuntimeError(f"git merge-tree failed in {path} for {base}..{head}")
    tree, *conflicts = out.splitlines()
    ancestor, _ = _git_status(path, "merge-base", "--is-ancestor", base, head)
    return MergeCheck(base, head, status == 1, ancestor != 0, tree, tuple(dict.fromkeys(conflicts)))


def merge_commit(path: Path, branch: str, check: MergeCheck, message: str) -> str:
    """A merge commit of `check.head` into `branch` (at `check.base`), as GitHub's merge
    button makes it; the branch moves to it only if it is still at `check.base`."""
    commit = _git(
        path, "commit-tree", check.tree, "-p", check.base, "-p", check.head, "-m", message
    )
    _git(path, "update-ref", f"refs/heads/{branch}", commit, check.base)
    return commit


@dataclass(frozen=True)
class ChangedFile:
    """One file a pull request changes, as `git diff base...head` tells it."""

    filename: str
    status: str  # GitHub's words: "added" | "removed" | "modified" | "renamed"
    sha: str  # the blob at head ("0"*40 for a removed file)
    additions: int
    deletions: int
    patch: str  # from the first "@@" on, as GitHub's `patch` field holds it
    previous_filename: str | None = None


_STATUS = {"A": "added", "D": "removed", "M": "modified", "R": "renamed", "T": "changed"}


def changed_files(path: Path, base: str, head: str) -> list[ChangedFile]:
    found = []
    statuses = _git(path, "diff", "--name-status", "-M", f"{base}...{head}").splitlines()
    counts = _git(path, "diff", "--numstat", "-M", f"{base}...{head}").splitlines()
    for status_line, count_line in zip(statuses, counts, strict=True):
        kind, *names = status_line.split("\t")
        added, deleted, _ = count_line.split("\t", 2)
        name = names[-1]
        patch = _git(path, "diff", "-M", f"{base}...{head}", "--", *names)
        sha = "0" * 40 if kind == "D" else _git(path, "rev-parse", f"{head}:{name}")
        found.append(
            ChangedFile(
                filename=name,
                status=_STATUS.get(kind[0], "modified"),
                sha=sha,
                additions=int(added) if added.isdigit() else 0,
                deletions=int(deleted) if deleted.isdigit() else 0,
                patch=patch[patch.find("@@") :] if "@@" in patch else "",
                previous_filename=names[0] if kind.startswith("R") else None,
            )
        )
    return found


_HUNK_SIDES = re.compile(r"^@@ -(\d+)(?:,\d+)? \+(\d+)(?:,\d+)? @@")


def hunk_through(patch: str, line: int, side: str = "RIGHT") -> tuple[str, int] | None:
    """The diff hunk of `patch` that shows `line` (of the head for side RIGHT, of the base
    for LEFT), cut after that line (GitHub's `diff_hunk` of a review comment), and that
    line's `position` (lines below the first "@@", counting later "@@" lines too); None
    when the diff does not show that line."""
    hunk: list[str] = []
    old = new = 0
    for position, text in enumerate(patch.splitlines()):
        header = _HUNK_SIDES.match(text)
        if header:
            hunk, old, new = [text], int(header.group(1)), int(header.group(2))
            continue
        if not hunk:
            continue
        hunk.append(text)
        removed, added = text.startswith("-"), text.startswith("+")
        if (side == "RIGHT" and not removed and new == line) or (
            side == "LEFT" and not added and old == line
        ):
            return "\n".join(hunk), position
        old += 0 if added else 1
        new += 0 if removed else 1
    return None


@dataclass(frozen=True)
class CommitInfo:
    sha: str
    tree: str
    message: str
    timestamp: int  # the committer's date, epoch seconds
    author_name: str
    author_email: str
    parents: tuple[str, ...]


def commit_info(path: Path, sha: str) -> CommitInfo | None:
    try:
        raw = _git(path, "show", "-s", "--format=%H%x00%T%x00%ct%x00%an%x00%ae%x00%P%x00%B", sha)
    except RuntimeError:
        return None
    full, tree, stamp, name, email, parents, message = raw.split("\0", 6)
    return CommitInfo(full, tree, message.strip(), int(stamp), name, email, tuple(parents.split()))


def resolve_commit(path: Path, ref: str) -> str | None:
    """The commit a branch name, tag or sha names (GitHub's `{ref}` in a commit's path)."""
    if ref.startswith("-"):
        return None
    try:
        return _git(path, "rev-parse", "--verify", "--quiet", f"{ref}^{{commit}}")
    except RuntimeError:
        return None


def commits_between(path: Path, base: str, head: str) -> list[str]:
    """The commits of a pull request from `base` to `head`: reachable from `head`, not
    from `base` (`git rev-list base..head`), newest first."""
    try:
        raw = _git(path, "rev-list", f"{base}..{head}")
    except RuntimeError:
        return []
    return raw.split()


def branches_containing(path: Path, sha: str) -> list[str]:
    try:
        raw = _git(path, "branch", "--format=%(refname:short)", "--contains", sha)
    except RuntimeError:
        return []
    return raw.split()[:10]  # GitHub names at most 10
