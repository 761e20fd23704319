"""A coding run's network in the real sandbox (bubblewrap, the relay, the worker's proxy):
out only to allowlisted hosts, every refusal recorded; no secret on any command line; a
file-size limit."""

from __future__ import annotations

import asyncio
import json
import logging
import os
import sys
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from aiohttp import web

from bot.lifecycle.coding import CodingOutcome, CodingRequest, CodingStatus, run_coding
from bot.lifecycle.egress import egress_problem
from bot.lifecycle.sandbox import Network, SandboxPolicy, SandboxRun
from tests.fakes.lifecycle import PATIENCE_SECONDS, wait_for
from tests.fakes.sandbox import exchange_dir, require_bwrap
from tests.fakes.served import served

SECRET = "sk-egress-test-secret-0123456789"
# Runs in the sandbox: the model server by its base URL (no proxy variables honoured: the
# relay listens on that address inside), the same through HTTPS_PROXY with CONNECT, a host
# off the allowlist, the host's Redis directly and through the proxy.
REACH = r"""
import json, os, socket, sys, urllib.request
port = int(sys.argv[1])
seen = {}
def through_proxy(target):
    proxy = int(os.environ["HTTPS_PROXY"].rsplit(":", 1)[1])
    with socket.create_connection(("127.0.0.1", proxy), timeout=10) as tunnel:
        tunnel.sendall(b"CONNECT %s HTTP/1.1\r\nHost: %s\r\n\r\n" % (target, target))
        status = tunnel.recv(39)
        if b" 200 " not in status:
            return status.split(b"\r\n")[0].decode()
        tunnel.sendall(b"GET /v1/models HTTP/1.1\r\nHost: m\r\nConnection: close\r\n\r\n")
        return b"".join(iter(lambda: tunnel.recv(4096), b"")).decode().rsplit("\n", 1)[-1]
no_proxy = urllib.request.build_opener(urllib.request.ProxyHandler({}))
seen["base_url"] = no_proxy.open(f"http://127.0.0.1:{port}/v1/models", timeout=10).read().decode()
seen["connect"] = through_proxy(b"127.0.0.1:%d" % port)
seen["other_host"] = through_proxy(b"example.org:443")
seen["redis_proxy"] = through_proxy(b"127.0.0.1:6379")
try:
    socket.create_connection(("127.0.0.1", 6379), timeout=3).close()
    seen["redis_direct"] = "connected"
except OSError as exc:
    seen["redis_direct"] = type(exc).__name__
seen["no_proxy"] = os.environ["NO_PROXY"]
print(json.dumps({"type": "result", "status": "done", "summary": json.dumps(seen)}))
"""
# Waits (its marker file says it is running) until the test has looked at every process.
LINGER = r"""
import json, os, sys, time
exchange = sys.argv[1]
mine = []
for pid in os.listdir("/proc"):
    if pid.isdigit():
        with open(f"/proc/{pid}/cmdline", "rb") as raw:
            mine.append(raw.read().decode(errors="replace"))
open(os.path.join(exchange, "running"), "w").write(str(len(mine)))
while not os.path.exists(os.path.join(exchange, "looked")):
    time.sleep(0.05)
leak = any(os.environ["MODEL_KEY"] in line for line in mine)
print(json.dumps({"type": "result", "status": "done", "summary": json.dumps(leak)}))
"""
WRITE_BIG = r"""
import errno, json
try:
    with open("big.bin", "wb") as big:
        big.write(b"x" * (3 * 1024 * 1024))
    said = "written"
except OSError as exc:
    said = errno.errorcode.get(exc.errno, str(exc.errno))
print(json.dumps({"type": "result", "status": "done", "summary": said}))
"""


@pytest.fixture
async def model_server() -> AsyncIterator[int]:
    async def models(request: web.Request) -> web.Response:
        return web.Response(text="models: fake-1")

    app = web.Application()
    app.router.add_get("/v1/models", models)
    async with served(app) as port:
        yield port


def _policy(**overrides: object) -> SandboxPolicy:
    values: dict[str, object] = {
        "read_only": (Path(sys.prefix), Path(sys.base_prefix)),
        "memory_mb": 1024,
        "max_processes": 32,
        "network": Network.ALLOWLIST,
        "env_passthrough": ("MODEL_KEY",),
    }
    values.update(overrides)
    return SandboxPolicy(**values)  # type: ignore[arg-type]


async def _run(tmp_path: Path, policy: SandboxPolicy, *argv: str) -> CodingOutcome:
    folder = tmp_path / "run"
    (folder / "repo").mkdir(parents=True)

    async def nothing(*args: object) -> None:
        return None

    outcome = await run_coding(
        CodingRequest(
            command=[sys.executable, *argv],
            run=SandboxRun(repo=folder / "repo", tmp=folder / "tmp", prompt=folder / "p.md"),
            prompt="the prompt",
            time_limit=60,
            task_env={},
            policy=policy,
        ),
        stop=asyncio.Event(),
        on_start=nothing,
        on_session=nothing,
        on_usage=lambda tokens, cost: None,
    )
    assert outcome.status == CodingStatus.DONE, outcome.log.text()
    return outcome


async def test_the_runtime_reaches_an_allowed_server_and_nothing_else_of_the_host(
    tmp_path: Path, model_server: int
) -> None:
    require_bwrap()
    # A port below 1024 cannot be listened on by the runtime's user: the run goes on without it.
    policy = _policy(private_hosts=(f"127.0.0.1:{model_server}", "127.0.0.1:80"))
    outcome = await _run(tmp_path, policy, "-c", REACH, str(model_server))
    assert "steelframe relay: not listening on 127.0.0.1:80" in outcome.log.text()
    seen = json.loads(outcome.summary)
    assert seen["base_url"] == "models: fake-1"  # the relay listens on the base URL's address
    assert seen["connect"] == "models: fake-1"  # and the proxy tunnels to it
    assert seen["no_proxy"] == f"127.0.0.1:{model_server}"
    assert seen["other_host"] == seen["redis_proxy"] == "HTTP/1.1 403 Forbidden"
    assert seen["redis_direct"] == "ConnectionRefusedError"
    blocked = {(b.host, b.port, b.count) for b in outcome.blocked}
    assert blocked == {("example.org", 443, 1), ("127.0.0.1", 6379, 1)}


def _command_lines() -> list[bytes]:
    """Every process's command line on this host, the sandbox's included (bwrap, the relay,
    the runtime)."""
    lines = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            lines.append(Path(f"/proc/{pid}/cmdline").read_bytes())
        except OSError:
            continue
    return lines


async def test_no_secret_is_on_the_command_line_of_any_process(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    require_bwrap()
    monkeypatch.setenv("MODEL_KEY", SECRET)
    exchange = exchange_dir(tmp_path)
    policy = _policy(writable=(exchange,))
    running = asyncio.ensure_future(_run(tmp_path, policy, "-c", LINGER, str(exchange)))
    try:
        await wait_for(
            lambda: (exchange / "running").exists() or running.done(), within=PATIENCE_SECONDS
        )
        lines = await asyncio.to_thread(_command_lines)
        (exchange / "looked").write_text("")
        outcome = await running
    finally:
        running.cancel()
    assert any(b"bwrap\0--args\0" in line for line in lines)  # the options came by descriptor
    assert not any(SECRET.encode() in line for line in lines)
    assert json.loads(outcome.summary) is False  # nor inside, where the runtime looks
    assert "running" in os.listdir(exchange)


async def test_a_file_past_the_size_limit_cannot_be_written(tmp_path: Path) -> None:
    require_bwrap()
    outcome = await _run(tmp_path, _policy(file_size_mb=1, network=Network.OFF), "-c", WRITE_BIG)
    assert outcome.summary == "EFBIG"
    assert (tmp_path / "run" / "repo" / "big.bin").stat().st_size == 1024 * 1024


def test_the_egress_probe_finds_the_filter_working_here() -> None:
    require_bwrap()
    egress_problem.cache_clear()
    assert egress_problem() is None


def test_the_egress_probe_logs_no_refusal_a_runs_proxy_does(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """The probe's refusal is asked for: in dev's terminal a line saying "egress: refused"
    before the first run read as a fault (a run's proxy logs each of its refusals:
    tests/test_egress_proxy.py)."""
    require_bwrap()
    egress_problem.cache_clear()
    with caplog.at_level(logging.INFO, logger="bot.lifecycle.egress_proxy"):
        assert egress_problem() is None
    assert "egress: refused" not in caplog.text
