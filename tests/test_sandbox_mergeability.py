"""`mergeable` and `mergeable_state` of a pull request, as GitHub computes them: lazily
(`null` first, the answer on a later read) from a test merge of the head into the base as
git has them now; a conflicting pull request cannot be merged (405). The `github_sandbox`
fixture's teardown checks every answer and webhook against GitHub's description."""

from __future__ import annotations

from typing import Any

from github_sandbox.git import branch_sha, commit_info
from tests.conftest import SANDBOX_REPO, GitHubSandbox
from tests.fakes.git import branch_with_file
from tests.test_sandbox_after_pr import Person, deliveries
from tests.test_sandbox_after_pr import pull as pull  # the `pull` fixture
from tests.test_sandbox_after_pr import reviewer as reviewer  # the `reviewer` fixture


def _git_path(github_sandbox: GitHubSandbox) -> Any:
    repo = github_sandbox.sandbox.world.repo(SANDBOX_REPO)
    assert repo is not None and repo.git_path is not None
    return repo.git_path


async def _merge_state(person: Person, number: int) -> tuple[Any, Any]:
    """The pull request's mergeability once GitHub's background job has answered: the
    first read of new tips is `null`, "unknown"."""
    first = await person.call("GET", f"/pulls/{number}", status=200)
    assert (first["mergeable"], first["mergeable_state"]) == (None, "unknown")
    again = await person.call("GET", f"/pulls/{number}", status=200)
    return again["mergeable"], again["mergeable_state"]


async def test_the_first_read_is_null_and_a_later_one_says_clean(
    pull: dict[str, Any], reviewer: Person
) -> None:
    assert await _merge_state(reviewer, pull["number"]) == (True, "clean")
    # Known now: read again, it stays (no new job while the tips stay).
    read = await reviewer.call("GET", f"/pulls/{pull['number']}", status=200)
    assert (read["mergeable"], read["rebaseable"], read["mergeable_state"]) == (True, True, "clean")


async def test_a_base_that_moved_without_conflict_is_behind_and_merges_with_a_merge_commit(
    github_sandbox: GitHubSandbox, pull: dict[str, Any], reviewer: Person
) -> None:
    git_path = _git_path(github_sandbox)
    base = branch_with_file(git_path, "main", "other.md", "elsewhere\n")
    assert await _merge_state(reviewer, pull["number"]) == (True, "behind")
    merged = await reviewer.call("PUT", f"/pulls/{pull['number']}/merge", {}, status=200)
    commit = commit_info(git_path, merged["sha"])
    assert commit is not None and commit.parents == (base, pull["sha"])
    read = await reviewer.call("GET", f"/pulls/{pull['number']}", status=200)
    assert (read["merged"], read["merge_commit_sha"]) == (True, merged["sha"])


async def test_a_conflicting_base_is_dirty_and_its_merge_is_refused(
    github_sandbox: GitHubSandbox, pull: dict[str, Any], reviewer: Person
) -> None:
    git_path = _git_path(github_sandbox)
    base = branch_with_file(git_path, "main", "notes.md", "another first line\n")
    number = pull["number"]
    assert await _merge_state(reviewer, number) == (False, "dirty")
    refused = await reviewer.call("PUT", f"/pulls/{number}/merge", {}, status=405)
    assert refused["message"] == "Pull Request is not mergeable"
    read = await reviewer.call("GET", f"/pulls/{number}", status=200)
    assert (read["state"], read["merged"], read["mergeable_state"]) == ("open", False, "dirty")
    assert read["base"]["sha"] == base  # the test merge was made on the base as it is now
    assert branch_sha(git_path, "main") == base  # nothing moved
    await github_sandbox.settle()
    assert [d["action"] for d in deliveries(github_sandbox, "pull_request")] == ["opened"]


async def test_a_webhook_carries_what_is_known_and_null_for_new_tips(
    github_sandbox: GitHubSandbox, pull: dict[str, Any], reviewer: Person
) -> None:
    """Webhook payloads compute nothing: the pull request's `opened` (nothing known yet)
    said `null`; a review request sent once the conflict is known says "dirty"."""
    branch_with_file(_git_path(github_sandbox), "main", "notes.md", "another first line\n")
    number = pull["number"]
    assert await _merge_state(reviewer, number) == (False, "dirty")
    await github_sandbox.client().request_reviewers(SANDBOX_REPO, number, ["rita"])
    await github_sandbox.settle()
    sent = [
        (d["action"], d["pull_request"]["mergeable"], d["pull_request"]["mergeable_state"])
        for d in deliveries(github_sandbox, "pull_request")
    ]
    assert sent == [("opened", None, "unknown"), ("review_requested", False, "dirty")]
