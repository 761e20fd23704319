"""A hostile coding runtime in the real sandbox and the real worker path, trying what the
other attack tests do not (`tests/fakes/coding/trespasser.py`): descriptors it inherited,
requests smuggled past the egress proxy, the proxy's connection slots, and plants for the
worker's own git and file reads after the run (hooks, config, attributes, symlinks to the
App key). Where bubblewrap cannot run these tests say they did not run, except under
CI=true, where they fail."""

from __future__ import annotations

import asyncio
import json
import re
import stat
import subprocess
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from aiohttp import web

from bot.lifecycle import coding
from bot.lifecycle.models import EventKind
from bot.lifecycle.states import TaskState
from tests.conftest import GitHubSandbox
from tests.fakes.coding import command
from tests.fakes.git import commit_files
from tests.fakes.lifecycle import Make
from tests.fakes.lifecycle import make_fixture as make_fixture  # the `make` fixture
from tests.fakes.sandbox import exchange_dir, require_bwrap
from tests.fakes.served import served


@pytest.fixture
async def echo_server() -> AsyncIterator[int]:
    """The one server the run may reach: /echo answers with the head it was sent."""

    async def echo(request: web.Request) -> web.Response:
        head = [f"{request.method} {request.path_qs}"]
        head += [f"{name}: {value}" for name, value in request.headers.items()]
        return web.Response(text="\n".join(head))

    app = web.Application()
    app.router.add_route("*", "/echo", echo)
    async with served(app) as port:
        yield port


def _pushed(git_path: Path) -> str:
    return subprocess.run(
        ["git", "-C", str(git_path), "log", "--all", "--patch", "--format=fuller"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout


@pytest.mark.slow
async def test_a_trespassing_runtime_reaches_nothing_and_its_plants_never_run(
    make: Make, github_sandbox: GitHubSandbox, tmp_path: Path, echo_server: int
) -> None:
    require_bwrap()
    key_file = tmp_path / "app-key.pem"  # outside the sandbox, readable by the worker
    key_file.write_text(github_sandbox.private_key)
    markers = exchange_dir(tmp_path) / "markers"
    markers.mkdir()
    markers.chmod(0o777)
    lc = await make(
        coding_command=command("trespasser", key_file, markers, echo_server),
        coding_network="allowlist",
        egress_private=(f"127.0.0.1:{echo_server}",),
        private_key=None,
        private_key_path=key_file,
    )
    issue = await lc.open_issue("Make the widget blue")
    await lc.work()
    task = lc.task(issue)
    log = await (await lc.api.get(f"/api/operator/tasks/{task.id}/log")).json()
    said = "\n".join(run["text"] for run in log["runs"])
    attempts = dict(re.findall(r"ATTEMPT (\w+): (SUCCEEDED|blocked)", said))
    assert len(attempts) >= 10, said
    assert [name for name, v in attempts.items() if v == "SUCCEEDED"] == [], said
    assert sorted(p.name for p in markers.iterdir()) == [], "a plant ran outside the sandbox"
    assert task.state == TaskState.DELIVERED, said
    key_lines = [line for line in github_sandbox.private_key.splitlines() if "-----" not in line]
    git_path = lc.sandbox.sandbox.world.repo(lc.repo).git_path
    pushed = await asyncio.to_thread(_pushed, git_path)
    (pull,) = await lc.pulls()
    for line in key_lines[:3]:
        assert line not in pushed and line not in pull["body"]
    assert "root:" not in pushed


async def test_a_runtime_printing_session_lines_in_a_loop_writes_a_bounded_record(
    make: Make,
) -> None:
    """Each session line was a task row update and an event row with its transcript (up to
    a line's megabyte): a runtime printing them in a loop filled the shared database for
    as long as it ran. A session is stored when it changes, a few times a run, its
    transcript cut to a size a continuation's environment can carry."""
    require_bwrap()
    lines, size = 300, 100_000
    lc = await make(coding_command=command("session_flood", lines, size))
    issue = await lc.open_issue("Make the widget blue")
    await lc.work()
    task = lc.task(issue)
    assert task.state == TaskState.DELIVERED
    stored = [e for e in lc.events(task.id) if e.kind == EventKind.RUNTIME_SESSION]
    assert 0 < len(stored) <= coding.MAX_SESSION_UPDATES, len(stored)
    written = sum(len(json.dumps(e.data)) for e in stored)
    assert written <= coding.MAX_SESSION_UPDATES * (coding.MAX_TRANSCRIPT_CHARS + 200), written
    assert task.runtime_transcript is not None
    assert len(task.runtime_transcript) <= coding.MAX_TRANSCRIPT_CHARS


async def test_a_line_past_the_limit_is_cut_and_the_result_after_it_still_read(
    make: Make,
) -> None:
    """A line over MAX_LINE_BYTES ended the reading of its stream: the result line after it
    was lost (the run failed, "exited without a result line"), and a runtime that went on
    writing could block on the pipe no one read."""
    require_bwrap()
    lc = await make(coding_command=command("long_lines", 3), task_time_limit=60)
    issue = await lc.open_issue("Make the widget blue")
    await lc.work()
    task = lc.task(issue)
    log = await (await lc.api.get(f"/api/operator/tasks/{task.id}/log")).json()
    said = "\n".join(run["text"] for run in log["runs"])
    assert task.state == TaskState.DELIVERED, task.last_error
    assert "a line on stdout went past" in said and "a line on stderr went past" in said
    assert len(said) < coding.MAX_LOG_CHARS


async def test_a_set_uid_program_setup_made_is_not_kept_set_uid_by_the_worker(
    make: Make,
) -> None:
    """The worker (root in the image) copies what setup made into the setup cache: a copy
    kept the set-uid and set-gid bits and became root's, a set-uid-root program of the
    repository's on the host (the data directory is readable by all by default)."""
    require_bwrap()
    lc = await make(coding_command=command("commit"))
    setup = "mkdir -p .deps && cp /usr/bin/id .deps/tool && chmod 6755 .deps/tool"
    commit_files(
        lc.sandbox.sandbox.world.repo(lc.repo).git_path,
        {".steelframe/config.yml": f"setup:\n  - {setup}\n"},
    )
    issue = await lc.open_issue("Make the widget blue")
    await lc.work()
    assert lc.task(issue).state == TaskState.DELIVERED, lc.task(issue).last_error
    cache = lc.settings.data_dir / "setup-cache"
    (kept,) = [p for p in cache.rglob("tool") if p.parent.name == ".deps"]
    mode = kept.lstat().st_mode
    assert stat.S_ISREG(mode) and mode & 0o755 == 0o755
    assert not mode & (stat.S_ISUID | stat.S_ISGID), oct(mode)
