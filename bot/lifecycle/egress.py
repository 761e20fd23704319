"""A coding run's egress, put together: the proxy runs for as long as the sandboxed process
(`running_egress`); `egress_problem` says whether the filter works on this host (doctor and
readiness ask it) and `ensure_available` refuses a run without it. The parts:
`egress_policy` (what is allowed), `egress_proxy` (the worker's proxy), `egress_relay` (its
in-sandbox half), `egress_blocked` (what was refused)."""

from __future__ import annotations

import asyncio
import contextlib
import functools
import os
import shutil
import sys
import tempfile
from collections.abc import AsyncIterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from bot.clock import Clock, utcnow
from bot.lifecycle import sandbox
from bot.lifecycle.egress_blocked import BlockedLog
from bot.lifecycle.egress_proxy import EgressProxy
from bot.lifecycle.sandbox import (
    Launch,
    Network,
    SandboxPolicy,
    SandboxRun,
    SandboxUnavailable,
    wrap,
)
from bot.lifecycle.sandbox_spawn import spawn

PROBE_TIMEOUT_SECONDS = 30.0
# Run inside the sandbox by the probe: a direct connection to the host's loopback must
# fail, and the proxy (HTTPS_PROXY, set by the relay) must refuse a host not allowed.
_PROBE = r"""
import os, socket, sys
try:
    socket.create_connection(("127.0.0.1", int(sys.argv[1])), timeout=3).close()
    print("direct: connected")
except OSError:
    print("direct: refused")
port = int(os.environ["HTTPS_PROXY"].rsplit(":", 1)[1])
with socket.create_connection(("127.0.0.1", port), timeout=10) as proxy:
    proxy.sendall(b"CONNECT 127.0.0.1:%d HTTP/1.1\r\nHost: x\r\n\r\n" % int(sys.argv[1]))
    print("proxy:", proxy.recv(200).split(b"\r\n", 1)[0].decode())
"""


@contextlib.asynccontextmanager
async def running_egress(
    launch: Launch, clock: Clock = utcnow, *, narrate: bool = True
) -> AsyncIterator[BlockedLog]:
    """The run's proxy, listening before the launch starts and closed after; what it
    refused is in the BlockedLog (and, with `narrate`, the log). A launch without egress
    gets an empty log."""
    blocked = BlockedLog(clock)
    if launch.egress is None:
        yield blocked
        return
    proxy = EgressProxy(launch.egress.allowlist, blocked, narrate=narrate)
    await proxy.start(launch.egress.socket)
    try:
        yield blocked
    finally:
        await proxy.close()
        with contextlib.suppress(FileNotFoundError):
            launch.egress.socket.unlink()


@functools.lru_cache(maxsize=1)
def egress_problem() -> str | None:
    """None when a sandboxed run's network is closed and its proxy filters on this host,
    else why not (cached: the host does not change while a process runs). Blocking (about
    half a second, once); it runs its own event loop on a thread of its own, so any caller
    may ask, an async one through `asyncio.to_thread`."""
    interpreter = os.path.realpath(sys.executable)
    with ThreadPoolExecutor(max_workers=1, thread_name_prefix="egress-probe") as pool:
        try:
            return pool.submit(asyncio.run, _probe(interpreter)).result()
        except (OSError, SandboxUnavailable) as exc:
            return f"the egress probe could not run: {exc}"


def ensure_available(policy: SandboxPolicy) -> list[str]:
    """`sandbox.ensure_available`, and with the allowlist network, that the egress filter
    works here: no filter, no run (the run fails with the reason, as without bwrap)."""
    warnings = sandbox.ensure_available(policy)
    if policy.enabled and policy.network == Network.ALLOWLIST:
        problem = egress_problem()
        if problem is not None:
            raise SandboxUnavailable(problem)
    return warnings


async def _probe(interpreter: str) -> str | None:
    listener = await asyncio.start_server(_hang_up, "127.0.0.1", 0)
    port = listener.sockets[0].getsockname()[1]
    scratch = Path(tempfile.mkdtemp(prefix="steelframe-egress-probe-"))
    try:
        run = SandboxRun(repo=scratch / "repo", tmp=scratch / "tmp", prompt=scratch / "p.md")
        run.repo.mkdir()
        run.prompt.write_text("probe\n")
        policy = SandboxPolicy(network=Network.ALLOWLIST, read_only=(Path(sys.base_prefix),))
        launch = wrap(policy, run, [interpreter, "-I", "-S", "-c", _PROBE, str(port)], {})
        # The refusal it asks for is no news: logged, it read as a fault in a newcomer's
        # first run. What the probe found is what `egress_problem` returns (doctor, readiness).
        async with running_egress(launch, narrate=False) as blocked:
            said = await _run(launch, policy)
    finally:
        listener.close()
        shutil.rmtree(scratch, ignore_errors=True)
    if "direct: refused" not in said:
        return f"the coding sandbox reached the host's loopback directly ({said.strip()!r})"
    if "proxy: HTTP/1.1 403" not in said or not blocked.hosts():
        return f"the egress proxy did not refuse a host off the allowlist ({said.strip()!r})"
    return None


async def _run(launch: Launch, policy: SandboxPolicy) -> str:
    # Started as a run is (its own cgroup or uid): RLIMIT_NPROC of a uid shared with other
    # runs would count the relay's threads with theirs, and a busy host would fail the probe.
    spawned = await spawn(
        launch, policy, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT
    )
    process = spawned.process
    try:
        out, _ = await asyncio.wait_for(process.communicate(), PROBE_TIMEOUT_SECONDS)
    except TimeoutError:
        process.kill()
        await process.wait()
        return "timed out"
    finally:
        await spawned.ended()  # its uid let go
    return out.decode(errors="replace")


async def _hang_up(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    writer.close()
