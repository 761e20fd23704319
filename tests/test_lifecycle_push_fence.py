"""The push fence on the remote, with real git: a run claims its branch when it starts,
and its push is one atomic compare-and-swap of the fence ref and the branch, so a run
whose branch another run claimed since (it lost its lease) changes nothing on the remote.

The whole path (a stalled worker, a takeover, the woken push) is in
tests/test_lifecycle_fencing.py; these pin the git mechanics each case rests on."""

from __future__ import annotations

from pathlib import Path

import pytest

from bot.lifecycle import worktree
from bot.lifecycle.worktree import WorktreeError, fence_ref
from tests.fakes.git import seeded_origin

BRANCH = "steelframe/issue-1"


async def _origin(tmp_path: Path) -> str:
    return (await seeded_origin(tmp_path)).as_uri()


async def _refs(tmp_path: Path) -> dict[str, str]:
    """Every ref of the remote (what anyone fetching it would see)."""
    listed = await worktree.git(tmp_path, "ls-remote", str(tmp_path / "origin.git"))
    return {ref: sha for sha, ref in (line.split("\t") for line in listed.splitlines())}


async def _run(tmp_path: Path, url: str, name: str) -> worktree.Worktree:
    """A run's start: claim the branch, then clone it."""
    folder = tmp_path / name
    fence = await worktree.claim(folder, url=url, token=None, branch=BRANCH, who=name)
    return await worktree.prepare(folder, clone_url=url, token=None, branch=BRANCH, fence=fence)


def _claim(url: str, tree: worktree.Worktree) -> worktree.Claim:
    return worktree.Claim(url, BRANCH, tree.remote)


async def _change(tree: worktree.Worktree, name: str) -> None:
    (tree.path / f"{name}.md").write_text(f"{name}\n")
    assert await worktree.commit_all(tree, name)


async def test_a_run_whose_branch_was_claimed_since_pushes_nothing(tmp_path: Path) -> None:
    url = await _origin(tmp_path)
    stale = await _run(tmp_path, url, "stale")
    await _change(stale, "stale")
    taker = await _run(tmp_path, url, "taker")  # took the task over: claimed the branch
    before = await _refs(tmp_path)
    assert before[fence_ref(BRANCH)] == taker.remote.fence_sha
    with pytest.raises(WorktreeError):
        await worktree.push(stale, token=None, who="stale")
    assert await _refs(tmp_path) == before  # neither the branch nor the fence moved
    await _change(taker, "taker")
    await worktree.push(taker, token=None, who="taker")
    after = await _refs(tmp_path)
    assert after[f"refs/heads/{BRANCH}"] == taker.remote.branch_sha
    assert after[fence_ref(BRANCH)] == taker.remote.fence_sha != before[fence_ref(BRANCH)]
    # The stale run, woken again, still cannot push over the holder's branch.
    with pytest.raises(WorktreeError):
        await worktree.push(stale, token=None, who="stale")
    assert await _refs(tmp_path) == after


async def test_the_holder_pushes_again_and_a_continuation_starts_from_its_branch(
    tmp_path: Path,
) -> None:
    url = await _origin(tmp_path)
    first = await _run(tmp_path, url, "first")
    await _change(first, "one")
    await worktree.push(first, token=None, who="first")
    await _change(first, "two")  # a second push of the same run (its state moved on)
    await worktree.push(first, token=None, who="first")
    later = await _run(tmp_path, url, "later")
    assert later.resumed and later.remote.branch_sha == first.remote.branch_sha
    assert (later.path / "two.md").read_text() == "two\n"
    # A clone never fetches the fence ref: it is not a branch.
    listed = await worktree.git(later.path, "for-each-ref", git_dir=later.git_dir)
    assert "refs/steelframe" not in listed


async def test_a_push_over_a_branch_someone_else_moved_is_refused(tmp_path: Path) -> None:
    url = await _origin(tmp_path)
    run = await _run(tmp_path, url, "run")
    await _change(run, "run")
    other = await worktree.prepare(tmp_path / "person", clone_url=url, token=None, branch=BRANCH)
    await _change(other, "person")
    await worktree.git(
        other.path, "push", "--quiet", url, f"HEAD:refs/heads/{BRANCH}", git_dir=other.git_dir
    )
    before = await _refs(tmp_path)
    with pytest.raises(WorktreeError):
        await worktree.push(run, token=None, who="run")
    assert await _refs(tmp_path) == before  # the person's commit is not overwritten


async def test_a_finished_run_releases_its_claim_and_a_stale_run_still_pushes_nothing(
    tmp_path: Path,
) -> None:
    url = await _origin(tmp_path)
    stale = await _run(tmp_path, url, "stale")
    await _change(stale, "stale")
    done = await _run(tmp_path, url, "done")  # took over, pushed, finished
    await _change(done, "done")
    await worktree.push(done, token=None, who="done")
    await worktree.release(tmp_path / "done", _claim(url, done), token=None)
    after = await _refs(tmp_path)
    assert fence_ref(BRANCH) not in after  # no claim left in the repository
    assert after[f"refs/heads/{BRANCH}"] == done.remote.branch_sha
    with pytest.raises(WorktreeError):  # the stale run's claim is gone, not free to take
        await worktree.push(stale, token=None, who="stale")
    assert await _refs(tmp_path) == after
    # The next run claims again; a late release of the finished one leaves that claim.
    later = await _run(tmp_path, url, "later")
    with pytest.raises(WorktreeError):
        await worktree.release(tmp_path / "done", _claim(url, done), token=None)
    assert (await _refs(tmp_path))[fence_ref(BRANCH)] == later.remote.fence_sha


async def test_a_run_that_never_cloned_releases_its_claim_from_its_own_folder(
    tmp_path: Path,
) -> None:
    """A run whose clone failed after its claim: nothing but the claim to go by."""
    url = await _origin(tmp_path)
    folder = tmp_path / "failed"
    fence = await worktree.claim(folder, url=url, token=None, branch=BRANCH, who="failed")
    assert (await _refs(tmp_path))[fence_ref(BRANCH)] == fence
    claim = worktree.Claim(url, BRANCH, worktree.RemoteState("", fence))
    await worktree.release(folder, claim, token=None)
    assert fence_ref(BRANCH) not in await _refs(tmp_path)
    assert list(folder.iterdir()) == []  # its git directory for the release is gone too
