"""What a sandboxed run sees (docs/lifecycle.md, "The sandbox"): bubblewrap's mount options
for the read-only system, the run's own places, the operator's extra paths and the egress
relay. `bot.lifecycle.sandbox.wrap` puts them in a launch."""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

from bot.lifecycle import egress_relay

INSIDE_REPO = "/workspace"
INSIDE_TMP = "/tmp"
INSIDE_PROMPT = "/run/steelframe/prompt.md"
INSIDE_EGRESS_SOCKET = "/run/steelframe/egress.sock"
INSIDE_RELAY = "/run/steelframe/relay.py"
SYSTEM_DIRS = ("/usr",)
SYSTEM_LINKS = ("/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32")
# /etc as a whole holds host secrets (shadow, ssh host keys, the worker's configs); the
# runtime gets what name resolution, TLS, dynamic linking and user lookup need.
ETC_FILES = (
    "/etc/alternatives",
    "/etc/ca-certificates",
    "/etc/ca-certificates.conf",
    "/etc/group",
    "/etc/host.conf",
    "/etc/hosts",
    "/etc/ld.so.cache",
    "/etc/ld.so.conf",
    "/etc/ld.so.conf.d",
    "/etc/localtime",
    "/etc/mime.types",
    "/etc/nsswitch.conf",
    "/etc/passwd",
    "/etc/pki",
    "/etc/resolv.conf",
    "/etc/services",
    "/etc/ssl",
)


def _ancestors(path: PurePosixPath) -> list[str]:
    return [str(p) for p in reversed(path.parents) if str(p) != "/"]


@dataclass(frozen=True)
class SandboxRun:
    """One run's own places on the host: all three are shown to the runtime, nothing else
    of the run folder (the worker's git directory sits beside `repo`, unseen)."""

    repo: Path
    tmp: Path
    prompt: Path
    # An agent's own state kept between a task's runs: read-write at the same path.
    home: Path | None = None

    @property
    def egress_socket(self) -> Path:
        """The run's egress proxy listens here, beside the prompt (in the run's folder)."""
        return self.prompt.with_name("egress.sock")


def mounts(
    run: SandboxRun,
    *,
    read_only: tuple[Path, ...],
    writable: tuple[Path, ...],
    repo_read_only: bool,
) -> list[str]:
    args: list[str] = []
    for name in SYSTEM_DIRS:
        args += ["--ro-bind", name, name]
    for name in SYSTEM_LINKS:
        if os.path.islink(name):
            args += ["--symlink", os.readlink(name), name]
        elif os.path.isdir(name):
            args += ["--ro-bind", name, name]
    # bwrap makes missing parents private to root; the runtime (nobody, as root) must see in.
    args += ["--perms", "0755", "--dir", "/etc"]
    for name in ETC_FILES:
        args += ["--ro-bind-try", name, name]
    args += ["--proc", "/proc", "--dev", "/dev"]
    # The run's own places first: an extra path under /tmp is mounted over the private /tmp.
    repo_mode = "--ro-bind" if repo_read_only else "--bind"
    args += [repo_mode, str(run.repo), INSIDE_REPO, "--bind", str(run.tmp), INSIDE_TMP]
    made: set[str] = {"/usr", "/etc", "/proc", "/dev", "/tmp"}
    writable = (*writable, *([run.home] if run.home is not None else []))
    # A read-only extra that does not exist (yet) is simply not shown.
    for mode, paths in (("--ro-bind-try", read_only), ("--bind", writable)):
        for path in paths:
            for parent in _ancestors(PurePosixPath(path)):
                if parent not in made:
                    args += ["--perms", "0755", "--dir", parent]
                    made.add(parent)
            args += [mode, str(path), str(path)]
            made.add(str(path))
    args += ["--perms", "0755", "--dir", "/run", "--perms", "0755", "--dir", "/run/steelframe"]
    args += ["--ro-bind", str(run.prompt), INSIDE_PROMPT]
    return args


def egress_mounts(socket: Path, made: set[str]) -> list[str]:
    """The proxy's socket, the relay script and the interpreter that runs it (read-only)."""
    args = ["--bind", str(socket), INSIDE_EGRESS_SOCKET]
    args += ["--ro-bind", egress_relay.__file__, INSIDE_RELAY]
    prefix = PurePosixPath(sys.base_prefix)
    if not any(prefix.is_relative_to(root) for root in made):
        for parent in _ancestors(prefix):
            if parent not in made:
                args += ["--perms", "0755", "--dir", parent]
        args += ["--ro-bind", str(prefix), str(prefix)]
    return args
