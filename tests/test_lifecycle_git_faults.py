"""The worker's git steps that reach the remote (claim, clone, push) against GitHub's git
over HTTP in the sandbox, with injected faults: a 5xx or 429 is tried again with backoff,
a push whose answer was lost is found landed (not pushed twice), and a refusal or a
lasting outage fails the step without a wasted try."""

from __future__ import annotations

from pathlib import Path

import pytest

from bot.lifecycle import worktree
from bot.lifecycle.worktree import WorktreeError, fence_ref
from tests.conftest import SANDBOX_REPO, GitHubSandbox
from tests.fakes.git import clone_url

BRANCH = "steelframe/issue-1"
PUSH = "*.git/git-receive-pack"


@pytest.fixture(autouse=True)
def _quick_retries(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(worktree, "REMOTE_RETRY_DELAYS", (0.05, 0.05))


async def _remote(github_sandbox: GitHubSandbox) -> tuple[str, str]:
    """A token that may push to the sandbox repository, and its clone URL."""
    token = await github_sandbox.client().scoped_token(SANDBOX_REPO, {"contents": "write"})
    return token, await clone_url(github_sandbox, SANDBOX_REPO, token)


async def _refs(tree: worktree.Worktree, token: str) -> dict[str, str]:
    listed = await worktree.git(
        tree.path, "ls-remote", tree.url, token=token, url=tree.url, git_dir=tree.git_dir
    )
    return {ref: sha for sha, ref in (line.split("\t") for line in listed.splitlines())}


async def _start(github_sandbox: GitHubSandbox, tmp_path: Path) -> tuple[worktree.Worktree, str]:
    token, url = await _remote(github_sandbox)
    folder = tmp_path / "run"
    fence = await worktree.claim(folder, url=url, token=token, branch=BRANCH, who="run")
    tree = await worktree.prepare(folder, clone_url=url, token=token, branch=BRANCH, fence=fence)
    (tree.path / "CHANGE.md").write_text("a change\n")
    assert await worktree.commit_all(tree, "a change")
    return tree, token


def _hits(github_sandbox: GitHubSandbox) -> list[int]:
    return [fault.hits for fault in github_sandbox.sandbox.faults.faults]


async def test_each_step_meeting_a_5xx_or_429_lands_on_its_next_try(
    github_sandbox: GitHubSandbox, tmp_path: Path
) -> None:
    github_sandbox.fail(method="POST", path=PUSH, status=503)  # the claim
    github_sandbox.fail(method="GET", path="*.git/info/refs")  # the clone's first request
    github_sandbox.fail("too_many_requests", method="POST", path="*.git/git-upload-pack")
    tree, token = await _start(github_sandbox, tmp_path)
    assert _hits(github_sandbox) == [1, 1, 1]
    github_sandbox.fail(method="POST", path=PUSH)
    await worktree.push(tree, token=token, who="run")
    assert _hits(github_sandbox)[-1] == 1
    refs = await _refs(tree, token)
    assert refs[f"refs/heads/{BRANCH}"] == tree.remote.branch_sha
    assert refs[fence_ref(BRANCH)] == tree.remote.fence_sha


async def test_a_push_whose_answer_was_lost_is_found_landed_and_the_next_push_follows_it(
    github_sandbox: GitHubSandbox, tmp_path: Path
) -> None:
    tree, token = await _start(github_sandbox, tmp_path)
    github_sandbox.fail(method="POST", path=PUSH, after_effect=True)  # landed, answered 502
    await worktree.push(tree, token=token, who="run")
    refs = await _refs(tree, token)
    assert refs[f"refs/heads/{BRANCH}"] == tree.remote.branch_sha
    assert refs[fence_ref(BRANCH)] == tree.remote.fence_sha
    # The run's view of the remote is what landed: its next push goes through.
    (tree.path / "MORE.md").write_text("more\n")
    assert await worktree.commit_all(tree, "more")
    await worktree.push(tree, token=token, who="run")
    assert (await _refs(tree, token))[f"refs/heads/{BRANCH}"] == tree.remote.branch_sha


async def test_a_refusal_is_not_tried_again_and_an_outage_gives_up_after_three_tries(
    github_sandbox: GitHubSandbox, tmp_path: Path
) -> None:
    tree, token = await _start(github_sandbox, tmp_path)
    before = await _refs(tree, token)
    github_sandbox.fail(method="POST", path=PUSH, status=403, times=10)
    with pytest.raises(WorktreeError) as refused:
        await worktree.push(tree, token=token, who="run")
    assert not refused.value.transient and _hits(github_sandbox) == [1]
    github_sandbox.sandbox.faults.clear()
    github_sandbox.fail(method="POST", path=PUSH, times=10)
    with pytest.raises(WorktreeError) as outage:
        await worktree.push(tree, token=token, who="run")
    assert outage.value.transient and "502" in str(outage.value)
    assert _hits(github_sandbox) == [3]
    assert await _refs(tree, token) == before  # nothing moved


@pytest.mark.parametrize(
    ("stderr", "transient"),
    [
        ("fatal: unable to access 'https://x/': The requested URL returned error: 502", True),
        ("error: RPC failed; HTTP 429 curl 22 The requested URL returned error: 429", True),
        ("fatal: unable to access 'https://x/': Failed to connect to x port 443", True),
        ("error: RPC failed; curl 56 Recv failure: Connection reset by peer", True),
        ("fatal: the remote end hung up unexpectedly", True),
        ("fatal: unable to access 'https://x/': The requested URL returned error: 403", False),
        (
            "error: RPC failed; HTTP 413 curl 22 The requested URL returned error: 413\n"
            "fatal: the remote end hung up unexpectedly",
            False,
        ),
        ("remote: Repository not found.\nfatal: repository 'https://x/' not found", False),
        (" ! [rejected]   steelframe/issue-1 (stale info)\nerror: failed to push some refs", False),
    ],
)
def test_what_counts_as_worth_another_try(stderr: str, transient: bool) -> None:
    assert worktree.is_transient(stderr) is transient
