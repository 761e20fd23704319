"""The coding sandbox in tests: whether bubblewrap runs here, the settings that let the
scripted runtimes run inside it, and host-side views of the processes it started.

Sandbox tests call `require_bwrap()`: where bubblewrap cannot run they say they did not run
(skip with the reason), except under CI=true, where they fail (the PostgreSQL rule).
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any

import pytest

from bot.config_values import UidRange
from bot.lifecycle.agents.presets import PRESETS
from bot.lifecycle.sandbox import SandboxPolicy, SandboxUnavailable, ensure_available
from tests.fakes.agents import BIN as AGENTS
from tests.fakes.coding import HERE
from tests.fakes.patience import PATIENCE_SECONDS, wait_for
from tests.fakes.real_agents import cache_root

WRAPPERS = frozenset({"bwrap", "setpriv", "prlimit"})


def bwrap_problem() -> str | None:
    try:
        ensure_available(SandboxPolicy())
    except SandboxUnavailable as exc:
        return str(exc)
    return None


def require_bwrap() -> None:
    problem = bwrap_problem()
    if problem is None:
        return
    if os.environ.get("CI"):
        pytest.fail(f"the coding sandbox must run in CI: {problem}")
    pytest.skip(f"sandbox tests did not run: {problem}")


def own_uids(count: int) -> UidRange:
    """Uids of this test process's own (outside the default range the suite's other runs
    share), so a test can tell which of them its runs got."""
    start = 62000 + (os.getpid() % 1400) * 2
    return UidRange(start, start + count - 1)


def require_root() -> None:
    """Runs get a uid of their own only from a root worker (otherwise: a user namespace)."""
    if os.geteuid() != 0:
        pytest.skip("a uid per run needs a root worker (this one runs as a user)")


def exchange_dir(tmp_path: Path) -> Path:
    """A folder the scripted runtimes may write (pid files, markers), anyone's to write:
    as root, the runtime runs as nobody."""
    folder = tmp_path / "exchange"
    folder.mkdir(exist_ok=True)
    folder.chmod(0o777)
    return folder


def _agent_installs() -> list[Path]:
    """The real agents' pinned installs (not the cache's other folders: tests keep private
    data directories there)."""
    return [cache_root() / f"{preset.binary}-{preset.pinned}" for preset in PRESETS.values()]


def sandbox_settings(tmp_path: Path, *, sandbox: bool | None = None) -> dict[str, Any]:
    """Settings for the scripted runtimes: the interpreter and the scripts read-only, the
    exchange folder writable; in the sandbox when bubblewrap runs here (or `sandbox`)."""
    wanted = bwrap_problem() is None if sandbox is None else sandbox
    return {
        "coding_sandbox": "bwrap" if wanted else "off",
        # The interpreter, the scripted runtimes, the fake agent CLIs and the real ones.
        "coding_read_only_paths": (
            Path(sys.prefix),
            Path(sys.base_prefix),
            HERE,
            AGENTS,
            *_agent_installs(),
        ),
        "coding_writable_paths": (exchange_dir(tmp_path),),
    }


def _cmdline(pid: str) -> str:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as raw:
            return raw.read().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return ""


def host_pids(marker: str) -> list[int]:
    """Host pids of the processes whose command line names `marker` (a runtime in a pid
    namespace writes its own namespace's pids, which mean nothing out here)."""
    me = str(os.getpid())
    return sorted(
        int(pid)
        for pid in os.listdir("/proc")
        if pid.isdigit() and pid != me and marker in _cmdline(pid)
    )


def runtime_pids(marker: str) -> list[int]:
    """As `host_pids`, without the sandbox's own processes (bwrap names the command too)."""
    return [pid for pid in host_pids(marker) if _stat(pid)[0] not in WRAPPERS]


async def the_runtime(marker: str, *, within: float = PATIENCE_SECONDS) -> int:
    """The host pid of the one runtime whose command line names `marker`, once it is the
    only one: for a moment a process on its way to its own exec (a fork of a sandbox
    process) names it too, which a single look counted as a second runtime."""
    try:
        (pid,) = await wait_for(lambda: _only(runtime_pids(marker)), within=within)
    except AssertionError:
        named = [(pid, _stat(pid)[0], _cmdline(str(pid))[:200]) for pid in runtime_pids(marker)]
        raise AssertionError(f"not one runtime names {marker}: {named}") from None
    return int(pid)


def _only(pids: list[int]) -> list[int] | None:
    return pids if len(pids) == 1 else None


def _stat(pid: int) -> tuple[str, int]:
    with open(f"/proc/{pid}/stat") as stat:
        text = stat.read()
    name = text[text.index("(") + 1 : text.rindex(")")]
    return name, int(text.rsplit(")", 1)[1].split()[1])


def launcher_of(pid: int) -> int:
    """The process that started the runtime: its parent, past the sandbox's wrappers."""
    _, parent = _stat(pid)
    while _stat(parent)[0] in WRAPPERS:
        parent = _stat(parent)[1]
    return parent


def running_in_sandbox(pid: int) -> bool:
    _, parent = _stat(pid)
    return _stat(parent)[0] in WRAPPERS
