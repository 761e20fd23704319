"""A coding runtime cannot reach the worker's git: its `.git` is its own, and nothing it
plants there (a remote, a filter, a hook) sees the installation token or runs."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from aiohttp import web

from bot.lifecycle import worktree
from bot.lifecycle.states import TaskState
from tests.fakes.coding import command
from tests.fakes.git import seeded_origin
from tests.fakes.lifecycle import Make
from tests.fakes.lifecycle import make_fixture as make_fixture  # the `make` fixture
from tests.fakes.sandbox import exchange_dir


async def _listener(aiohttp_server: Any) -> tuple[str, list[dict[str, str]]]:
    seen: list[dict[str, str]] = []

    async def record(request: web.Request) -> web.Response:
        seen.append(dict(request.headers))
        return web.Response(status=404)

    app = web.Application()
    app.router.add_route("*", "/{tail:.*}", record)
    server = await aiohttp_server(app)
    return str(server.make_url("/stolen.git")), seen


async def test_a_runtime_rewriting_its_git_remote_never_receives_the_token(
    make: Make, aiohttp_server: Any, tmp_path: Path
) -> None:
    url, seen = await _listener(aiohttp_server)
    marker = exchange_dir(tmp_path) / "planted-ran"
    report = exchange_dir(tmp_path) / "runtime-git-config"
    lc = await make(coding_command=command("hostile", url, marker, report))
    issue = await lc.open_issue("Make the widget blue")
    await lc.work()
    assert seen == []  # nothing at all reached the runtime's remote, let alone the token
    assert lc.task(issue).state == TaskState.DELIVERED
    assert not marker.exists()  # neither the planted filter, fsmonitor nor hook ran
    branch = f"steelframe/issue-{issue}"
    assert lc.branch_file("CHANGE.md", branch) == "Hostile change\n"
    assert lc.branch_file("LEFT.md", branch) == "left uncommitted\n"
    runtime_config = report.read_text()
    assert "remote" not in runtime_config and "extraheader" not in runtime_config.lower()


async def test_the_worker_git_directory_is_outside_the_runtime_tree(tmp_path: Path) -> None:
    origin = await seeded_origin(tmp_path)
    tree = await worktree.prepare(
        tmp_path / "run", clone_url=origin.as_uri(), token="ghs_secret", branch="b"
    )
    assert not tree.git_dir.is_relative_to(tree.path)
    runtime_config = (tree.path / ".git" / "config").read_text()
    assert "origin.git" not in runtime_config and "ghs_secret" not in runtime_config
    assert "ghs_secret" not in (tree.git_dir / "config").read_text()
    (tree.path / "README.md").write_text("changed\n")
    assert await worktree.commit_all(tree, "change") and await worktree.commits_ahead(tree) == 1


def test_worker_git_gets_a_minimal_environment_and_a_header_scoped_to_the_origin(
    monkeypatch: Any,
) -> None:
    for name in ("PRIVATE_KEY", "WEBHOOK_SECRET", "OPENAI_API_KEY", "DATABASE_URL", "REDIS_URL"):
        monkeypatch.setenv(name, "secret")
    env = worktree.git_env("ghs_secret", "https://github.com/o/r.git")
    assert not {"PRIVATE_KEY", "WEBHOOK_SECRET", "OPENAI_API_KEY", "DATABASE_URL"} & set(env)
    assert "REDIS_URL" not in env
    assert env["GIT_CONFIG_GLOBAL"] == "/dev/null" and env["GIT_CONFIG_NOSYSTEM"] == "1"
    assert env["GIT_CONFIG_KEY_0"] == "http.https://github.com/.extraHeader"
    assert "GIT_CONFIG_KEY_0" not in worktree.git_env("ghs_secret", "file:///tmp/r.git")
