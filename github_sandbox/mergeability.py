"""Whether an open pull request merges into its base, as GitHub reports it: computed from
the repository's git (a test merge, `git merge-tree`), lazily.

GitHub docs, "Get a pull request": "The value of the `mergeable` attribute can be `true`,
`false`, or `null`. If the value is `null`, then GitHub has started a background job to
compute the mergeability. After giving the job time to complete, resubmit the request."
So a read of the pull request answers what is known for its current tips (base branch
and head branch as git has them now) and then starts the job, whose answer the next read
sees. Webhook payloads carry what is known, `null` otherwise. `pulls/merge` checks afresh.

`mergeable_state`: "dirty" when the test merge conflicts, "draft" for a draft, "behind"
when the base has commits the head lacks (and merges clean), "clean" otherwise; "unknown"
while not computed and for a closed pull request.
"""

from __future__ import annotations

from dataclasses import dataclass

from github_sandbox import git
from github_sandbox.state import Pull, Repo


@dataclass(frozen=True)
class Mergeability:
    mergeable: bool | None
    state: str  # GitHub's `mergeable_state`
    rebaseable: bool | None


UNKNOWN = Mergeability(None, "unknown", None)


def tips(repo: Repo, pull: Pull) -> tuple[str, str] | None:
    """The base branch's and the head branch's commits now (None: no git, or a branch
    is gone)."""
    if repo.git_path is None:
        return None
    base = git.branch_sha(repo.git_path, pull.base_ref)
    head = git.branch_sha(repo.git_path, pull.head_ref) or pull.head_sha
    return None if base is None else (base, head)


def reported(repo: Repo, pull: Pull, *, is_open: bool) -> Mergeability:
    """What GitHub would say now without computing anything."""
    check = pull.merge_check
    if not is_open or check is None or (check.base, check.head) != tips(repo, pull):
        return UNKNOWN
    return _of(check, draft=pull.draft)


def refresh(repo: Repo, pull: Pull) -> None:
    """The background job a read starts: the test merge for the current tips, unless known."""
    now = tips(repo, pull)
    check = pull.merge_check
    if repo.git_path is None or now is None:
        return
    if check is None or (check.base, check.head) != now:
        pull.merge_check = git.merge_check(repo.git_path, *now)
        # The test merge is made on the base as it is now, which the pull request's
        # `base.sha` then names.
        pull.base_sha = now[0]


def fresh(repo: Repo, pull: Pull) -> git.MergeCheck | None:
    """The test merge for the current tips, computed now (a merge asks); None without git."""
    refresh(repo, pull)
    return pull.merge_check if tips(repo, pull) is not None else None


def _of(check: git.MergeCheck, *, draft: bool) -> Mergeability:
    if check.conflicted:
        return Mergeability(False, "dirty", False)
    if draft:
        return Mergeability(True, "draft", True)
    return Mergeability(True, "behind" if check.behind else "clean", True)
