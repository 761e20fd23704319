"""A forking `steelframe worker` mints each installation token scope once over many task
runs for one installation, as one process does: a work horse hands the tokens it minted
back to the worker (bot.lifecycle.worker), whose next horse starts with them. Before, a
horse's tokens died with it (the shared token cache lives per process) and ten runs minted
81 tokens, every scope once a run. Real worker process, RQ, GitHub sandbox."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import pytest

from bot.config_values import Secret
from bot.github.app_auth import (
    InstallationToken,
    KeptTokens,
    TokenScope,
    hand_over,
    take_over,
)
from bot.lifecycle.states import TaskState
from tests.fakes.coding import command
from tests.fakes.lifecycle import PATIENCE_SECONDS, Lifecycle, Make, wait_for
from tests.fakes.lifecycle import make_fixture as make_fixture  # the `make` fixture
from tests.fakes.workers import start_worker, stop_processes

TOKENS = "/app/installations/{installation_id}/access_tokens"
# Enough runs that a scope minted once a run shows up several times (the measure behind the
# change was ten runs: 81 tokens before, 9 after); each run is a forked work horse.
RUNS = 4


def _minted(lc: Lifecycle) -> list[str]:
    """Every token minted so far, by the scope it was asked for."""
    traffic = lc.sandbox.sandbox.traffic
    return [
        json.dumps(ex.request, sort_keys=True)
        for ex in traffic
        if ex.route == TOKENS and ex.status < 400
    ]


@pytest.mark.slow  # a real worker process, RUNS task runs
async def test_a_forking_worker_mints_each_scope_once_over_several_runs(
    make: Make, tmp_path: Path
) -> None:
    lc = await make(coding_command=command("commit"))
    issues = [await lc.open_issue(f"Make widget {n} blue") for n in range(RUNS)]
    before = len(_minted(lc))  # the service's own, while the issues were picked up
    worker = start_worker(lc, tmp_path / "worker.log")  # RQ's forking worker
    try:
        await wait_for(
            lambda: all(lc.task(issue).state == TaskState.DELIVERED for issue in issues),
            within=PATIENCE_SECONDS * 5,
        )
    finally:
        await stop_processes([worker], within=10)
    by_scope = Counter(_minted(lc)[before:])
    assert by_scope, "the runs minted nothing: the count below would prove nothing"
    assert [scope for scope, times in by_scope.items() if times > 1] == [], by_scope
    assert "could not hand its tokens back" not in (tmp_path / "worker.log").read_text()


def test_a_handed_token_is_taken_only_when_fresh_and_newer() -> None:
    """What crosses the pipe: fresh tokens only; a later-expiring one wins; bytes a horse
    killed mid-write left are dropped (the next job mints, as before)."""
    now = 1_000_000.0
    scope = TokenScope.of(7, "Owner/Repo", {"contents": "write"})
    stale = TokenScope(7, "owner/other")
    horse: KeptTokens = {
        scope: InstallationToken(Secret("ghs_new"), now + 3600),
        stale: InstallationToken(Secret("ghs_stale"), now + 60),  # inside the refresh margin
    }
    data = hand_over(horse, clock=lambda: now)
    assert b"ghs_stale" not in data
    worker: KeptTokens = {scope: InstallationToken(Secret("ghs_old"), now + 1800)}
    assert take_over(worker, data) == 1
    assert worker[scope].token.reveal() == "ghs_new" and stale not in worker
    assert take_over(worker, data[: len(data) // 2]) == 0
    assert take_over(worker, hand_over({scope: worker[scope]}, clock=lambda: now)) == 0
