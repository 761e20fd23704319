"""Dev is instant: no GitHub write pacing against the local sandbox (it stays for GitHub),
and a Chat turn that waits on GitHub streams progress frames meanwhile."""

from __future__ import annotations

import asyncio
from pathlib import Path
from types import SimpleNamespace

from bot.chat.progress import progress_while
from bot.config_values import Secret
from bot.contracts.chat import Frame, StatusFrame
from bot.github.client import GitHubClient
from steelframe.dev import on_sandbox
from tests.conftest import GitHubSandbox, make_settings


async def test_dev_on_the_sandbox_writes_unpaced_and_github_stays_paced(
    tmp_path: Path, github_sandbox: GitHubSandbox
) -> None:
    sandbox = SimpleNamespace(
        app_id=github_sandbox.app_id,
        private_key=github_sandbox.private_key,
        webhook_secret="s",
        url=github_sandbox.url,
    )
    dev = GitHubClient.from_settings(on_sandbox(make_settings(tmp_path), sandbox))
    production = GitHubClient.from_settings(
        make_settings(tmp_path, app_id=7, private_key=Secret(github_sandbox.private_key))
    )
    try:
        assert dev.pacer.policy.min_interval == 0
        assert production.pacer.policy.min_interval == 1.0  # GitHub's 1 s between writes
    finally:
        await dev.close()
        await production.close()


async def test_a_wait_on_github_streams_status_frames_until_it_ends() -> None:
    frames: list[Frame] = []
    second = asyncio.Event()

    async def emit(frame: Frame) -> None:
        frames.append(frame)
        if len(frames) == 2:
            second.set()

    async with progress_while(emit, "waiting on GitHub", quiet=0.01, tick=0.01):
        await asyncio.wait_for(second.wait(), 10)  # the filing, still waiting
    # The ticker is gone once the wait ended (cancelled and awaited): no frame can follow.
    assert [t for t in asyncio.all_tasks() if t is not asyncio.current_task()] == []
    assert len(frames) >= 2
    assert all(
        isinstance(f, StatusFrame) and f.text.startswith("waiting on GitHub · ") for f in frames
    )


async def test_a_quick_github_call_sends_no_frame() -> None:
    frames: list[Frame] = []

    async def emit(frame: Frame) -> None:
        frames.append(frame)

    async with progress_while(emit, "waiting on GitHub", quiet=30):
        pass
    assert frames == []
