"""The real agents reach only their model's API: the hosts Codex CLI and aider ask for on
their own (plugin sync, update checks, analytics, price lists) are switched off in their
invocation, so the run's egress proxy has nothing of theirs to refuse and show on the task."""

from __future__ import annotations

import asyncio
import shutil
import subprocess
import tempfile
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest

from bot.lifecycle.agents import aider, codex
from bot.lifecycle.agents.base import AgentRun
from bot.lifecycle.agents.presets import Agent
from tests.fakes.real_agents import cache_root, real_agent_bin
from tests.fakes.serve_process import free_port


class RecordingProxy:
    """An HTTP proxy that notes the host of every request and refuses it (403), as the
    run's egress proxy refuses a host that is not on the allowlist."""

    def __init__(self) -> None:
        self.hosts: list[str] = []

    async def handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        request_line = (await reader.readline()).decode("latin-1").split()
        if len(request_line) >= 2:
            target = request_line[1]
            if "://" in target:  # plain HTTP: an absolute URL
                target = target.split("://", 1)[1].split("/", 1)[0]
            self.hosts.append(target.rsplit(":", 1)[0] if ":" in target else target)
        while (await reader.readline()) not in (b"\r\n", b""):
            pass
        writer.write(b"HTTP/1.1 403 Forbidden\r\ncontent-length: 0\r\n\r\n")
        await writer.drain()
        writer.close()


@pytest.fixture
async def proxy() -> AsyncIterator[tuple[RecordingProxy, str]]:
    recording = RecordingProxy()
    server = await asyncio.start_server(recording.handle, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    try:
        yield recording, f"http://127.0.0.1:{port}"
    finally:
        server.close()
        await server.wait_closed()


@pytest.fixture
def outside_tmp() -> Iterator[Path]:
    """Codex refuses to make its helper binaries under a temporary directory."""
    cache_root().mkdir(parents=True, exist_ok=True)
    folder = Path(tempfile.mkdtemp(prefix="quiet-", dir=cache_root()))
    try:
        yield folder
    finally:
        shutil.rmtree(folder, ignore_errors=True)


async def test_codex_asks_for_no_host_but_its_model_api(
    proxy: tuple[RecordingProxy, str], outside_tmp: Path
) -> None:
    recording, proxy_url = proxy
    binary = real_agent_bin(Agent.CODEX) / "codex"
    checkout, home = outside_tmp / "checkout", outside_tmp / "home"
    checkout.mkdir()
    home.mkdir()
    init = await asyncio.create_subprocess_exec("git", "init", "-q", str(checkout))
    assert await init.wait() == 0
    model_api = f"http://127.0.0.1:{free_port()}/v1"  # nothing listens: the turn fails
    launch = codex.launch(AgentRun(prompt="say hi", cwd=checkout), base_url=model_api)
    env = {
        "PATH": "/usr/bin:/bin",
        "HOME": str(home),
        "CODEX_HOME": str(home),
        "CODEX_API_KEY": "sk-test",
        "HTTPS_PROXY": proxy_url,
        "HTTP_PROXY": proxy_url,
        "ALL_PROXY": proxy_url,
    }
    process = await asyncio.create_subprocess_exec(
        str(binary),
        *launch.argv[1:],
        cwd=checkout,
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        await asyncio.wait_for(process.wait(), 180)  # it gives up on the model by itself
    finally:
        if process.returncode is None:
            process.kill()
            await process.wait()
    assert "127.0.0.1" in recording.hosts  # the proxy was used: the model's API was asked
    assert {host for host in recording.hosts if host != "127.0.0.1"} == set()


def test_aider_uses_litellms_own_price_list(tmp_path: Path) -> None:
    """litellm's download of its price list is off (its documented variable); aider's own
    copy of that list has no switch (aider/models.py, ModelInfoManager)."""
    launch = aider.launch(AgentRun(prompt="do it", cwd=tmp_path), tmp_path)
    assert launch.env["LITELLM_LOCAL_MODEL_COST_MAP"] == "True"
    for flag in ("--no-check-update", "--analytics-disable", "--no-show-release-notes"):
        assert flag in launch.argv
