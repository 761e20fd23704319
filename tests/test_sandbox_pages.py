"""The sandbox's HTML pages at the html_urls it hands out: an issue with labels and
comments, a pull request with its state and diff, escaped text, 404 for what is hidden."""

from __future__ import annotations

import subprocess

import aiohttp

from github_sandbox.git import branch_sha
from tests.conftest import GitHubSandbox

HOSTILE = '<script>alert("x")</script> & <img src=x onerror=alert(1)>'


async def fetch(url: str) -> tuple[int, str, str]:
    async with aiohttp.ClientSession() as http, http.get(url) as response:
        return response.status, response.content_type, await response.text()


def push_branch(sandbox: GitHubSandbox, branch: str) -> None:
    """A commit on `branch` in the sandbox's bare repository (what a worker push leaves)."""
    git_path = sandbox.sandbox.world.repo(sandbox.repo).git_path
    env = {"GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@x", "GIT_COMMITTER_NAME": "t"}
    env |= {"GIT_COMMITTER_EMAIL": "t@x", "PATH": "/usr/bin:/bin"}

    def git(*args: str, stdin: str | None = None) -> str:
        done = subprocess.run(
            ["git", "--git-dir", str(git_path), *args],
            input=stdin,
            capture_output=True,
            text=True,
            env=env,
            check=True,
        )
        return done.stdout.strip()

    blob = git("hash-object", "-w", "--stdin", stdin="a new line\n")
    tree = git("mktree", stdin=f"100644 blob {blob}\tNOTES.md\n")
    commit = git("commit-tree", tree, "-p", "main", "-m", "notes")
    git("update-ref", f"refs/heads/{branch}", commit)


async def test_an_issue_page_shows_title_labels_and_comments_escaped(
    github_sandbox: GitHubSandbox,
) -> None:
    client = github_sandbox.client()
    issue = await client.create_issue(
        github_sandbox.repo, title=f"Title {HOSTILE}", body=f"Body {HOSTILE}", labels=["bug"]
    )
    await client.create_comment(github_sandbox.repo, issue.number, f"Comment {HOSTILE}")
    status, kind, html = await fetch(issue.html_url)
    assert (status, kind) == (200, "text/html")
    assert "<script>" not in html and "onerror=alert(1)>" not in html
    assert "&lt;script&gt;alert(&#34;x&#34;)&lt;/script&gt; &amp;" in html
    assert "Body &lt;script&gt;" in html and "Comment &lt;script&gt;" in html
    assert ">bug</span>" in html


async def test_a_pull_request_page_shows_state_branches_and_diff(
    github_sandbox: GitHubSandbox,
) -> None:
    client = github_sandbox.client()
    push_branch(github_sandbox, "steelframe/issue-1")
    pull = await client.create_pull(
        github_sandbox.repo,
        title="Add notes",
        head="steelframe/issue-1",
        base="main",
        body="Fixes #1",
    )
    status, kind, html = await fetch(pull.html_url)
    assert (status, kind) == (200, "text/html")
    assert "Open</span>" in html and "<code>steelframe/issue-1</code>" in html
    assert '<span class="add">+a new line</span>' in html and "NOTES.md" in html
    answer = await client.request("GET", github_sandbox.repo, f"/pulls/{pull.number}")
    status, kind, diff = await fetch(answer.data["diff_url"])  # not a field Steelframe reads
    assert (status, kind) == (200, "text/plain") and "+a new line" in diff
    status, _, repo_page = await fetch(f"{github_sandbox.url}/{github_sandbox.repo}")
    assert status == 200 and "Add notes" in repo_page


async def test_unknown_numbers_kinds_and_private_repos_are_404(
    github_sandbox: GitHubSandbox,
) -> None:
    client = github_sandbox.client()
    issue = await client.create_issue(github_sandbox.repo, title="An issue", body="", labels=[])
    base = f"{github_sandbox.url}/{github_sandbox.repo}"
    assert (await fetch(f"{base}/issues/999"))[0] == 404
    assert (await fetch(f"{base}/pull/{issue.number}"))[0] == 404  # an issue, not a PR
    github_sandbox.sandbox.add_repo("steelframe-dev/secret", private=True, notify=False)
    assert (await fetch(f"{github_sandbox.url}/steelframe-dev/secret"))[0] == 404


async def test_a_commit_page_shows_its_message_and_change_escaped(
    github_sandbox: GitHubSandbox,
) -> None:
    """GitHub's `/{owner}/{repo}/commit/{sha}`, which the Board's ledger links: by full or
    short sha; an unknown sha or a private repository's commit is 404."""
    push_branch(github_sandbox, "steelframe/issue-2")
    git_path = github_sandbox.sandbox.world.repo(github_sandbox.repo).git_path
    assert git_path is not None
    sha = branch_sha(git_path, "steelframe/issue-2")
    assert sha is not None
    base = f"{github_sandbox.url}/{github_sandbox.repo}"
    for shown in (sha, sha[:7]):
        status, kind, html = await fetch(f"{base}/commit/{shown}")
        assert (status, kind) == (200, "text/html")
        assert f"<code>{sha}</code>" in html and "<h1>notes</h1>" in html
        assert '<span class="add">+a new line</span>' in html and "NOTES.md" in html
    assert (await fetch(f"{base}/commit/{'0' * 40}"))[0] == 404
    github_sandbox.sandbox.add_repo("steelframe-dev/secret", private=True, notify=False)
    assert (await fetch(f"{github_sandbox.url}/steelframe-dev/secret/commit/{sha}"))[0] == 404
