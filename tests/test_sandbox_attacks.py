"""A hostile coding runtime inside the real sandbox (bubblewrap): every attack of issue 11
fails or is redacted, and no secret reaches a comment, a pull request, a pushed branch, a
memory chunk, a task event or the task row. Where bubblewrap cannot run these tests say
they did not run, except under CI=true, where they fail."""

from __future__ import annotations

import asyncio
import json
import re
import subprocess
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest
from sqlalchemy import text

from bot.config_values import Secret
from bot.lifecycle.branch import SECRET_FOUND
from bot.lifecycle.models import Task
from bot.lifecycle.states import TaskState
from tests.conftest import WEBHOOK_SECRET, GitHubSandbox
from tests.fakes.coding import command
from tests.fakes.lifecycle import Lifecycle, Make
from tests.fakes.lifecycle import make_fixture as make_fixture  # the `make` fixture
from tests.fakes.sandbox import exchange_dir, require_bwrap

LOOT = "sk-fake-model-key-0123456789abcdef"
METRICS_TOKEN = "scrape-the-attacks"
ATTEMPTS = (
    "proc_parent_environ",
    "proc_1_environ",
    "key_file",
    "database_file",
    "worker_git_dir",
    "worker_processes",
    *(
        f"{target}_{way}"
        for target in ("redis", "database", "service", "github")
        for way in ("port", "via_proxy")
    ),
    "mint_token",
    "post_comment",
)


async def _attack(
    make: Make, sandbox: GitHubSandbox, tmp_path: Path, monkeypatch: Any, mode: str, network: str
) -> Lifecycle:
    require_bwrap()
    key_file = tmp_path / "app-key.pem"  # the App key as a file, for the runtime to try
    key_file.write_text(sandbox.private_key)
    targets = exchange_dir(tmp_path) / "targets.json"  # the service's port, once it listens
    monkeypatch.setenv("FAKE_MODEL_API_KEY", LOOT)
    # The worker's own environment holds secrets, as a real worker's does.
    monkeypatch.setenv("WEBHOOK_SECRET", WEBHOOK_SECRET)
    monkeypatch.setenv("PRIVATE_KEY_PATH", str(key_file))
    attacker = command(
        "attacker",
        mode,
        key_file,
        tmp_path / "steelframe.db",  # the worker's database (make_settings puts it there)
        tmp_path / "var",  # its data directory, with the worktrees
        sandbox.url,
        sandbox.installation_id,
        targets,
    )
    lc = await make(
        coding_command=attacker,
        coding_network=network,
        coding_env_passthrough=("FAKE_MODEL_API_KEY",),
        private_key=None,
        private_key_path=key_file,
        metrics_token=Secret(METRICS_TOKEN),
    )
    service, github = urlsplit(str(lc.api.raw.make_url("/"))), urlsplit(sandbox.url)
    targets.write_text(json.dumps({"service": service.port, "github": github.port}))
    return lc


def _verdicts(log_text: str) -> dict[str, str]:
    return dict(re.findall(r"ATTEMPT (\w+): (SUCCEEDED|blocked)", log_text))


def _secrets(lc: Lifecycle) -> list[str]:
    key_lines = [line for line in lc.sandbox.private_key.splitlines() if "-----" not in line]
    tokens = list(lc.sandbox.sandbox.world.tokens)  # every installation token it issued
    assert tokens, "the worker minted tokens for its clone and API calls"
    return [LOOT, WEBHOOK_SECRET, *key_lines[:3], *tokens]


def _pushed(git_path: Path) -> str:
    """Everything on every branch of the remote: contents, messages, authors."""
    return subprocess.run(
        ["git", "-C", str(git_path), "log", "--all", "--patch", "--format=fuller"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout


async def _public_and_stored_text(lc: Lifecycle, issue: int, task_id: int) -> dict[str, str]:
    """Everything the run may have written anywhere, by where it is."""
    comments = "\n".join(c["body"] for c in await lc.comments(issue))
    pulls = "\n".join(f"{p['title']}\n{p['body']}" for p in await lc.pulls())
    git_path = lc.sandbox.sandbox.world.repo(lc.repo).git_path
    branches = await asyncio.to_thread(_pushed, git_path)
    events = "\n".join(f"{e.detail} {json.dumps(e.data)}" for e in lc.events(task_id))
    chunks = lc.ctx.db.call(
        lambda s: "\n".join(map(str, s.execute(text("SELECT text FROM memory_chunks")).scalars()))
    )
    task = lc.ctx.db.call(lambda s: s.get(Task, task_id))
    row = " ".join(
        str(getattr(task, name))
        for name in ("last_error", "summary", "question", "runtime_session", "runtime_transcript")
    )
    log = await (await lc.api.get(f"/api/operator/tasks/{task_id}/log")).json()
    return {
        "comments": comments,
        "pull requests": pulls,
        "pushed branches": branches,
        "task events": events,
        "memory chunks": chunks,
        "task row": row,
        "private log": "\n".join(run["text"] for run in log["runs"]),
    }


def _assert_nothing_leaked(lc: Lifecycle, found: dict[str, str]) -> None:
    for where, written in found.items():
        for secret in _secrets(lc):
            assert secret not in written, f"a secret reached the {where}"
    public = found["comments"] + found["pull requests"]
    assert "owned-by-the-attacker" not in public  # no comment as the App
    assert "<!-- steelframe-decision" not in public  # no marker a webhook would act on
    assert "RuntimeError" not in public and "model key, again" not in public  # no stderr
    assert "[REDACTED]" in found["private log"]  # the log kept what it said, masked


@pytest.mark.slow
@pytest.mark.parametrize("mode", ["steal", "fail"])
async def test_a_hostile_runtime_without_network_gets_nothing_and_leaks_nothing(
    make: Make, github_sandbox: GitHubSandbox, tmp_path: Path, monkeypatch: Any, mode: str
) -> None:
    lc = await _attack(make, github_sandbox, tmp_path, monkeypatch, mode, network="off")
    issue = await lc.open_issue("Make the widget blue", "Please.")
    await lc.work()
    task = lc.task(issue)
    found = await _public_and_stored_text(lc, issue, task.id)
    verdicts = _verdicts(found["private log"])
    assert set(verdicts) == set(ATTEMPTS), found["private log"]
    assert {name for name, v in verdicts.items() if v == "SUCCEEDED"} == set()
    assert task.state == TaskState.FAILED, found
    _assert_nothing_leaked(lc, found)
    assert await lc.pulls() == []
    if mode == "steal":
        # A diff carrying a known secret is never pushed: no branch, a private reason.
        assert lc.branch_file("STOLEN.md", f"steelframe/issue-{issue}") is None
        assert SECRET_FOUND in found["comments"]
        assert "STOLEN.md" in found["private log"]
        assert task.attempts == 1  # not retried
    else:
        # The reason the runtime declared, redacted and flattened: its words, not its output.
        assert "it said: gave up: key=[REDACTED]" in found["comments"]
        assert "@\u200bmaintainer" in found["comments"]


@pytest.mark.slow
async def test_a_hostile_runtime_with_the_allowlist_reaches_no_host_service_and_is_recorded(
    make: Make, github_sandbox: GitHubSandbox, tmp_path: Path, monkeypatch: Any
) -> None:
    lc = await _attack(make, github_sandbox, tmp_path, monkeypatch, "leak", network="allowlist")
    issue = await lc.open_issue("Make the widget blue", "Please.")
    await lc.work()
    task = lc.task(issue)
    assert task.state == TaskState.DELIVERED
    found = await _public_and_stored_text(lc, issue, task.id)
    (pull,) = await lc.pulls()
    verdicts = _verdicts(found["private log"])
    assert set(verdicts) == set(ATTEMPTS), found["private log"]
    # Its own network namespace: nothing on the host's loopback, directly or through the
    # run's egress proxy, which refused every attempt with a 403 and recorded it.
    assert {name for name, v in verdicts.items() if v == "SUCCEEDED"} == set()
    assert "redis_via_proxy: blocked (HTTP/1.1 403 Forbidden)" in found["private log"]
    detail = await (await lc.api.get(f"/api/operator/tasks/{task.id}")).json()
    (blocked,) = detail["blocked"]  # once per host: every attempt went to 127.0.0.1
    assert blocked["host"] == "127.0.0.1" and blocked["count"] == 6
    assert "blocked: 6 requests to `127.0.0.1`" in pull["body"]
    scrape = {"Authorization": f"Bearer {METRICS_TOKEN}"}
    metrics = await (await lc.api.raw.get("/metrics", headers=scrape)).text()
    assert "\nsteelframe_egress_blocked_requests 6.0\n" in metrics
    _assert_nothing_leaked(lc, found)
    assert "key=[REDACTED]" in pull["body"] and f"Fixes #{issue}" in pull["body"]
    assert lc.branch_file("CHANGE.md", f"steelframe/issue-{issue}") == "A harmless change\n"
    # The worker cloned and pushed with tokens for this repository alone, contents only.
    scopes = [
        (t.repos, t.permissions)
        for t in lc.sandbox.sandbox.world.tokens.values()
        if t.repos is not None
    ]
    repo = frozenset({lc.repo})
    assert (repo, {"metadata": "read", "contents": "read"}) in scopes
    assert (repo, {"metadata": "read", "contents": "write"}) in scopes
