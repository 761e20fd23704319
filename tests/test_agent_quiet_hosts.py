"""The real agents reach only their model's API: the hosts Codex CLI and aider ask for on
their own (plugin sync, update checks, analytics, price lists) are switched off in their
invocation, or their cache seeded in the agent's home, so the run's egress proxy has nothing
of theirs to refuse and show on the task."""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import subprocess
import tempfile
import time
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest

from bot.lifecycle.agents import aider, codex
from bot.lifecycle.agents.adapter import AIDER_PRICES, prepare
from bot.lifecycle.agents.base import AgentRun
from bot.lifecycle.agents.presets import Agent, adapter_command
from tests.fakes.ports import refused_port
from tests.fakes.real_agents import cache_root, real_agent_bin, real_aider_bin

# What a model's API answers a wrong key: agents give up at once (a 403 from the proxy is
# retried: aider backs off for a minute before it gives up).
UNAUTHORIZED = (
    b'{"error":{"message":"Incorrect API key provided","type":"invalid_request_error",'
    b'"code":"invalid_api_key"}}'
)


class RecordingProxy:
    """An HTTP proxy that notes the host of every request and refuses it (403), as the
    run's egress proxy refuses a host that is not on the allowlist; the model's API on
    127.0.0.1 is answered as the model answers a wrong key (401)."""

    def __init__(self) -> None:
        self.hosts: list[str] = []

    async def handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        request_line = (await reader.readline()).decode("latin-1").split()
        host = None
        if len(request_line) >= 2:
            target = request_line[1]
            if "://" in target:  # plain HTTP: an absolute URL
                target = target.split("://", 1)[1].split("/", 1)[0]
            host = target.rsplit(":", 1)[0] if ":" in target else target
            self.hosts.append(host)
        while (await reader.readline()) not in (b"\r\n", b""):
            pass
        if host == "127.0.0.1":
            head = b"HTTP/1.1 401 Unauthorized\r\ncontent-type: application/json\r\n"
            writer.write(head + b"content-length: %d\r\n\r\n" % len(UNAUTHORIZED) + UNAUTHORIZED)
        else:
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
    # Nothing listens there: the proxy answers for it, refusing the key, and the turn fails.
    model_api = f"http://127.0.0.1:{refused_port()}/v1"
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
    """litellm's download of its price list is off (its documented variable)."""
    launch = aider.launch(AgentRun(prompt="do it", cwd=tmp_path), tmp_path)
    assert launch.env["LITELLM_LOCAL_MODEL_COST_MAP"] == "True"
    for flag in ("--no-check-update", "--analytics-disable", "--no-show-release-notes"):
        assert flag in launch.argv


A_DAY_AGO = time.time() - 2 * 24 * 3600


def _aider_prices_after_launch(home: Path, checkout: Path) -> Path:
    run = AgentRun(prompt="do it", cwd=checkout, model="gpt-4o")
    with tempfile.TemporaryDirectory() as scratch:
        prepare(Agent.AIDER, run, Path(scratch), home)
    return home / AIDER_PRICES


@pytest.mark.parametrize("left", [None, "{}", "not json"], ids=["none", "empty", "broken"])
def test_aider_launch_seeds_its_price_list_in_the_agent_home(
    tmp_path: Path, left: str | None
) -> None:
    """aider downloads its copy of the price list when the cache file in its home is missing,
    older than a day or an empty object (what it writes itself after the proxy refused the
    download): the launch leaves one it reads as fresh and non-empty."""
    home = tmp_path / "home"
    cache = home / ".aider" / "caches" / "model_prices_and_context_window.json"
    if left is not None:
        cache.parent.mkdir(parents=True)
        cache.write_text(left)
        os.utime(cache, (A_DAY_AGO, A_DAY_AGO))
    seeded = _aider_prices_after_launch(home, tmp_path)
    assert seeded == cache
    content = json.loads(cache.read_text())
    assert isinstance(content, dict) and content  # aider asks again for {}
    assert "gpt-4o" not in content  # a model's prices still come from litellm's shipped list
    assert time.time() - cache.stat().st_mtime < 3600  # aider's limit is a day


def test_aider_launch_keeps_a_price_list_already_in_the_home(tmp_path: Path) -> None:
    """A home with a list of prices in it (a user's own ~/.aider) keeps it, read as fresh."""
    home = tmp_path / "home"
    cache = home / ".aider" / "caches" / "model_prices_and_context_window.json"
    cache.parent.mkdir(parents=True)
    kept = {"gpt-4o": {"input_cost_per_token": 2.5e-06, "litellm_provider": "openai"}}
    cache.write_text(json.dumps(kept))
    os.utime(cache, (A_DAY_AGO, A_DAY_AGO))
    _aider_prices_after_launch(home, tmp_path)
    assert json.loads(cache.read_text()) == kept
    assert time.time() - cache.stat().st_mtime < 3600


async def test_aider_asks_for_no_host_but_its_model_api(
    proxy: tuple[RecordingProxy, str], tmp_path: Path
) -> None:
    """The real aider through the adapter, as the worker starts it, with gpt-4o (not in
    aider's bundled metadata, so it looks for its price list) and every request going
    through a proxy that notes and refuses it."""
    recording, proxy_url = proxy
    binaries = real_aider_bin()
    checkout, home = tmp_path / "checkout", tmp_path / "home"
    checkout.mkdir()
    init = await asyncio.create_subprocess_exec("git", "init", "-q", str(checkout))
    assert await init.wait() == 0
    env = {
        "PATH": f"{binaries}:/usr/bin:/bin",
        "HOME": str(home),
        "STEELFRAME_AGENT_HOME": str(home),
        "STEELFRAME_AGENT_MODEL": "gpt-4o",
        "OPENAI_API_KEY": "sk-test",
        # Nothing listens there: the proxy answers for it, refusing the key, and aider gives up.
        "OPENAI_API_BASE": f"http://127.0.0.1:{refused_port()}/v1",
        "HTTPS_PROXY": proxy_url,
        "HTTP_PROXY": proxy_url,
    }
    process = await asyncio.create_subprocess_exec(
        *adapter_command(Agent.AIDER),
        cwd=checkout,
        env=env,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
    )
    try:
        said, _ = await asyncio.wait_for(process.communicate(b"Create hello.txt."), 180)
    finally:
        if process.returncode is None:
            process.kill()
            await process.wait()
    assert "127.0.0.1" in recording.hosts, said.decode()  # the model's API, through the proxy
    assert {host for host in recording.hosts if host != "127.0.0.1"} == set(), said.decode()
