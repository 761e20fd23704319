"""Git over smart HTTP at the sandbox's `clone_url`, with GitHub's access rules: the worker's
own git commands (`bot.lifecycle.worktree.git_env`: the token as a Basic header scoped to
the clone URL's origin) clone and push; what a token or a user may not do is refused as
GitHub refuses it (401, 404 "Repository not found.", 403 "Permission ... denied")."""

from __future__ import annotations

import asyncio
import os
import subprocess
from pathlib import Path

import aiohttp
import pytest

from bot.lifecycle import worktree
from bot.lifecycle.worktree import git_env
from github_sandbox import git as bare
from tests.conftest import SANDBOX_REPO, GitHubSandbox
from tests.fakes.git import clone_url


async def run_git(
    *args: str, cwd: Path, token: str | None, url: str
) -> subprocess.CompletedProcess[str]:
    """git as the worker runs it: no outside config, the token only for `url`'s origin."""
    return await asyncio.to_thread(
        subprocess.run,
        ["git", *args],
        cwd=cwd,
        env=git_env(token, url),
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


async def commit_file(folder: Path, name: str, text: str | None) -> None:
    """Commit `name` with `text` (None: as it already is on disk)."""
    if text is not None:
        (folder / name).write_text(text)
    for args in (("add", name), ("commit", "-q", "-m", f"add {name}")):
        done = await run_git(*args, cwd=folder, token=None, url="")
        assert done.returncode == 0, done.stderr


async def scoped_clone(
    github_sandbox: GitHubSandbox, folder: Path, contents: str
) -> tuple[str, str]:
    """A token narrowed to the sandbox repository's `contents` at that level, and the
    repository cloned with it into `folder` over its `clone_url`: (token, url)."""
    token = await github_sandbox.client().scoped_token(SANDBOX_REPO, {"contents": contents})
    url = await clone_url(github_sandbox, SANDBOX_REPO, token)
    cloned = await run_git("clone", "-q", url, folder.name, cwd=folder.parent, token=token, url=url)
    assert cloned.returncode == 0, cloned.stderr
    return token, url


async def test_the_worker_clones_and_pushes_over_http_with_a_scoped_token(
    github_sandbox: GitHubSandbox, tmp_path: Path
) -> None:
    work = tmp_path / "work"
    token, url = await scoped_clone(github_sandbox, work, "write")
    assert url == f"{github_sandbox.url}/{SANDBOX_REPO}.git"  # GitHub's shape, not a path
    assert (work / "README.md").exists()
    await run_git("checkout", "-q", "-b", "steelframe/issue-1", cwd=work, token=None, url=url)
    await commit_file(work, "CHANGE.md", "over http\n")
    pushed = await run_git("push", "-q", url, "steelframe/issue-1", cwd=work, token=token, url=url)
    assert pushed.returncode == 0, pushed.stderr
    git_path = github_sandbox.sandbox.world.repo(SANDBOX_REPO).git_path
    head = await asyncio.to_thread(bare.branch_sha, git_path, "steelframe/issue-1")
    local = await run_git("rev-parse", "HEAD", cwd=work, token=None, url=url)
    assert head == local.stdout.strip()


async def test_a_large_push_arrives_whole(github_sandbox: GitHubSandbox, tmp_path: Path) -> None:
    work = tmp_path / "big"
    token, url = await scoped_clone(github_sandbox, work, "write")
    await asyncio.to_thread((work / "blob.bin").write_bytes, os.urandom(3 * 1024 * 1024))
    await commit_file(work, "blob.bin", None)
    pushed = await run_git("push", "-q", url, "HEAD:refs/heads/big", cwd=work, token=token, url=url)
    assert pushed.returncode == 0, pushed.stderr
    again = await run_git(
        "clone", "-q", "-b", "big", url, "back", cwd=tmp_path, token=token, url=url
    )
    assert again.returncode == 0, again.stderr
    assert (tmp_path / "back" / "blob.bin").read_bytes() == (work / "blob.bin").read_bytes()


async def test_a_token_without_contents_write_cannot_push(
    github_sandbox: GitHubSandbox, tmp_path: Path
) -> None:
    work = tmp_path / "w"
    token, url = await scoped_clone(github_sandbox, work, "read")
    await commit_file(work, "NOPE.md", "refused\n")
    pushed = await run_git(
        "push", "-q", url, "HEAD:refs/heads/nope", cwd=work, token=token, url=url
    )
    assert pushed.returncode != 0
    assert "403" in pushed.stderr
    git_path = github_sandbox.sandbox.world.repo(SANDBOX_REPO).git_path
    assert await asyncio.to_thread(bare.branch_sha, git_path, "nope") is None


async def test_a_token_without_contents_cannot_clone(
    github_sandbox: GitHubSandbox, tmp_path: Path
) -> None:
    client = github_sandbox.client()
    token = await client.scoped_token(SANDBOX_REPO, {"issues": "write"})
    url = f"{github_sandbox.url}/{SANDBOX_REPO}.git"
    cloned = await run_git("clone", "-q", url, "c", cwd=tmp_path, token=token, url=url)
    assert cloned.returncode != 0 and "403" in cloned.stderr
    assert not (tmp_path / "c" / "README.md").exists()


async def test_a_token_narrowed_to_another_repository_finds_nothing(
    github_sandbox: GitHubSandbox, tmp_path: Path
) -> None:
    installation = github_sandbox.sandbox.world.installations[github_sandbox.installation_id]
    github_sandbox.sandbox.add_repo("steelframe-dev/other", installation=installation, notify=False)
    client = github_sandbox.client()
    token = await client.scoped_token("steelframe-dev/other", {"contents": "write"})
    url = f"{github_sandbox.url}/{SANDBOX_REPO}.git"
    listed = await run_git("ls-remote", url, cwd=tmp_path, token=token, url=url)
    assert listed.returncode != 0
    assert "Repository not found." in listed.stderr


@pytest.mark.parametrize(
    ("authorization", "status"),
    [
        (None, 401),  # a private repository asks for credentials
        ("Basic eC1hY2Nlc3MtdG9rZW46Z2hzX25vdF9pc3N1ZWQ=", 401),  # x-access-token:ghs_not_issued
        ("Basic !!!", 401),  # not base64
        ("Bearer ghs_whatever", 401),  # git sends Basic; anything else is no credential
    ],
)
async def test_missing_or_bad_credentials_are_asked_for_again(
    github_sandbox: GitHubSandbox, authorization: str | None, status: int
) -> None:
    github_sandbox.sandbox.add_repo("steelframe-dev/private", private=True, notify=False)
    headers = {"Authorization": authorization} if authorization else {}
    async with (
        aiohttp.ClientSession() as http,
        http.get(
            f"{github_sandbox.url}/steelframe-dev/private.git/info/refs",
            params={"service": "git-upload-pack"},
            headers=headers,
        ) as response,
    ):
        assert response.status == status
        assert response.headers["WWW-Authenticate"] == 'Basic realm="GitHub"'
        assert "x-ratelimit-remaining" not in response.headers  # not the REST API


async def test_an_expired_token_is_refused(github_sandbox: GitHubSandbox, tmp_path: Path) -> None:
    client = github_sandbox.client()
    token = await client.scoped_token(SANDBOX_REPO, {"contents": "write"})
    url = f"{github_sandbox.url}/{SANDBOX_REPO}.git"
    github_sandbox.sandbox.world.tokens[token].expires_at = 0.0
    listed = await run_git("ls-remote", url, cwd=tmp_path, token=token, url=url)
    # 401: git would ask for a user name and password, and may not (as on github.com).
    assert listed.returncode != 0 and "terminal prompts disabled" in listed.stderr
    with pytest.raises(worktree.WorktreeError, match=r"the remote refused the token \(HTTP 401"):
        await worktree.git(tmp_path, "ls-remote", url, token=token, url=url)


async def test_a_public_repository_clones_without_credentials_but_never_takes_a_push(
    github_sandbox: GitHubSandbox, tmp_path: Path
) -> None:
    github_sandbox.sandbox.add_repo("octo/public", notify=False)
    url = f"{github_sandbox.url}/octo/public.git"
    cloned = await run_git("clone", "-q", url, "p", cwd=tmp_path, token=None, url=url)
    assert cloned.returncode == 0, cloned.stderr
    work = tmp_path / "p"
    await commit_file(work, "ANON.md", "no\n")
    pushed = await run_git("push", "-q", url, "HEAD:refs/heads/anon", cwd=work, token=None, url=url)
    assert pushed.returncode != 0


async def test_a_user_pushes_only_with_write_permission(
    github_sandbox: GitHubSandbox, tmp_path: Path
) -> None:
    sandbox = github_sandbox.sandbox
    sandbox.add_repo("octo/tools", private=True, notify=False)
    sandbox.grant("octo/tools", "reader", "read")
    sandbox.grant("octo/tools", "writer", "write")
    url = f"{github_sandbox.url}/octo/tools.git"
    stranger = await run_git(
        "ls-remote", url, cwd=tmp_path, token=sandbox.user_token("stranger"), url=url
    )
    assert stranger.returncode != 0 and "Repository not found." in stranger.stderr
    reader = sandbox.user_token("reader")
    assert (
        await run_git("clone", "-q", url, "r", cwd=tmp_path, token=reader, url=url)
    ).returncode == 0
    await commit_file(tmp_path / "r", "R.md", "r\n")
    refused = await run_git(
        "push", "-q", url, "HEAD:refs/heads/r", cwd=tmp_path / "r", token=reader, url=url
    )
    assert refused.returncode != 0 and "Permission to octo/tools.git denied to reader" in (
        refused.stderr
    )
    writer = sandbox.user_token("writer")
    pushed = await run_git(
        "push", "-q", url, "HEAD:refs/heads/w", cwd=tmp_path / "r", token=writer, url=url
    )
    assert pushed.returncode == 0, pushed.stderr


@pytest.mark.parametrize(
    ("path", "query"),
    [
        ("/info/refs", {}),  # the dumb protocol
        ("/info/refs", {"service": "git-upload-archive"}),
    ],
)
async def test_only_the_smart_upload_and_receive_services_are_served(
    github_sandbox: GitHubSandbox, path: str, query: dict[str, str]
) -> None:
    async with (
        aiohttp.ClientSession() as http,
        http.get(f"{github_sandbox.url}/{SANDBOX_REPO}.git{path}", params=query) as response,
    ):
        assert response.status == 403
        assert "only" in await response.text()


async def test_a_push_to_a_pull_requests_branch_moves_its_head_with_synchronize(
    github_sandbox: GitHubSandbox, tmp_path: Path
) -> None:
    work = tmp_path / "work"
    token, url = await scoped_clone(github_sandbox, work, "write")
    await run_git("checkout", "-q", "-b", "steelframe/issue-1", cwd=work, token=None, url="")
    await commit_file(work, "A.md", "a\n")
    pushed = await run_git("push", "-q", url, "steelframe/issue-1", cwd=work, token=token, url=url)
    assert pushed.returncode == 0, pushed.stderr
    client = github_sandbox.client()
    pull = await client.create_pull(
        SANDBOX_REPO, title="A", head="steelframe/issue-1", base="main", body=""
    )
    before = pull.head.sha
    await commit_file(work, "A.md", "a, fixed\n")
    pushed = await run_git("push", "-q", url, "steelframe/issue-1", cwd=work, token=token, url=url)
    assert pushed.returncode == 0, pushed.stderr
    await github_sandbox.settle()
    synced = [
        d.payload
        for d in github_sandbox.sandbox.hooks.sent
        if (d.event, d.action) == ("pull_request", "synchronize")
    ]
    assert len(synced) == 1 and synced[0]["before"] == before
    after = (await client.get_pull(SANDBOX_REPO, pull.number)).head.sha
    assert synced[0]["after"] == after != before
    assert synced[0]["pull_request"]["head"]["sha"] == after


def _peak_reset() -> int:
    """Reset this process's peak RSS (Linux: `clear_refs` 5) and return the current RSS."""
    Path("/proc/self/clear_refs").write_text("5")
    return _status_bytes("VmRSS")


def _status_bytes(field: str) -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(f"{field}:"):
            return int(line.split()[1]) * 1024
    raise AssertionError(f"no {field} in /proc/self/status")


async def test_a_large_push_is_spooled_not_held(
    github_sandbox: GitHubSandbox, tmp_path: Path
) -> None:
    """The sandbox runs in this process (as in `steelframe dev`): receiving a 32 MiB pack
    of incompressible data leaves its peak memory where it was."""
    work = tmp_path / "big"
    token, url = await scoped_clone(github_sandbox, work, "write")
    await asyncio.to_thread((work / "noise.bin").write_bytes, os.urandom(32 * 1024 * 1024))
    await commit_file(work, "noise.bin", None)
    before = _peak_reset()
    pushed = await run_git(
        "push", "-q", url, "HEAD:refs/heads/noise", cwd=work, token=token, url=url
    )
    grown = _status_bytes("VmHWM") - before
    assert pushed.returncode == 0, pushed.stderr
    assert grown < 16 * 1024 * 1024, f"the sandbox grew by {grown / 2**20:.0f} MiB"
