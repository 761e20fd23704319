"""The coding runtime's sandbox: bubblewrap namespaces, an environment allowlist, limits.

The API is small on purpose: a `SandboxPolicy` (from settings), a `SandboxRun` (the run's
repository copy, private temporary directory and prompt file) and `wrap`, which turns the
runtime's argv and environment into a `Launch` (the argv and environment to exec). A
coding-agent preset only provides its argv, its environment and its output parsing.

What the runtime gets (docs/lifecycle.md, "The sandbox"): its repository copy read-write at
`/workspace`, a private `/tmp` (a folder of the run, on disk), the prompt read-only, and a
read-only system (`/usr`, the `/bin` and `/lib` links, a short list of `/etc` files, the
extra read-only paths the operator names; `bot.lifecycle.sandbox_mounts`). New user (or,
when the worker is root, a uid of the run's own: `bot.lifecycle.sandbox_uid`, set as it
starts, `Launch.as_user`), pid, ipc, uts, cgroup and network namespaces,
`--die-with-parent`. The network namespace has only its own loopback: with the network in
`allowlist` mode the way out is the run's egress proxy (`bot.lifecycle.egress`), reached
through a relay that starts first inside the sandbox; `off` has no way out. The
environment is an allowlist, handed to bubblewrap through an inherited descriptor
(`--args`), never its command line. Memory (data segment), process count and file size are
capped with prlimit; the process count only for a run that gets no cgroup of its own,
decided as it starts (`Launch.in_own_group`, `bot.lifecycle.sandbox_spawn`).
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import logging
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from pathlib import Path

from sqlalchemy.engine import make_url

from bot.config import Settings
from bot.config_values import DEFAULT_UID_RANGE, UidRange
from bot.contracts.tasks import CodingSandbox
from bot.lifecycle import sandbox_uid
from bot.lifecycle.egress_policy import Allowlist, Target, url_target
from bot.lifecycle.sandbox_mounts import (
    ETC_FILES,
    INSIDE_EGRESS_SOCKET,
    INSIDE_PROMPT,
    INSIDE_RELAY,
    INSIDE_REPO,
    INSIDE_TMP,
    SYSTEM_DIRS,
    SYSTEM_LINKS,
    egress_mounts,
    mounts,
)
from bot.lifecycle.sandbox_mounts import SandboxRun as SandboxRun  # where callers look

log = logging.getLogger(__name__)

# The only variables of the worker's environment that ever pass (plus the operator's list).
ALLOWED_ENV = ("PATH", "LANG", "LANGUAGE", "TZ", "TERM")
ALLOWED_ENV_PREFIXES = ("LC_",)
# When the worker runs as root, the runtime runs as an unprivileged uid, so the kernel
# enforces the process limit (it never does for uid 0) and no root-owned file is readable:
# the run's own, chosen as it starts (`Launch.as_user`); until then nobody.
UNPRIVILEGED_ID = sandbox_uid.NOBODY
PROBE_TIMEOUT_SECONDS = 20.0
INSTALL_HINT = (
    "install bubblewrap from your distribution (Debian/Ubuntu: `apt-get install bubblewrap`; "
    "Fedora: `dnf install bubblewrap`; Alpine: `apk add bubblewrap`), or set "
    "STEELFRAME_CODING_SANDBOX=off to run the coding runtime without isolation (it then "
    "sees everything the worker's user can)"
)
OFF_WARNING = (
    "STEELFRAME_CODING_SANDBOX=off: the coding runtime runs without isolation and can read "
    "whatever the worker's user can (its keys, database and Redis)"
)


class SandboxUnavailable(Exception):
    """The sandbox cannot run here; the message says why and how to install it."""


class Network(StrEnum):
    """The coding run's network (docs/lifecycle.md, "Egress"): its own namespace either way."""

    ALLOWLIST = "allowlist"  # out only through the run's proxy, to the allowlisted hosts
    OFF = "off"  # no way out


@dataclass(frozen=True)
class SandboxPolicy:
    enabled: bool = True
    network: Network = Network.ALLOWLIST
    env_passthrough: tuple[str, ...] = ()
    # Name prefixes that also pass (a preset's own settings, `CLAUDE_CODE_*`).
    env_prefixes: tuple[str, ...] = ()
    memory_mb: int = 4096
    max_processes: int = 256
    file_size_mb: int = 100
    read_only: tuple[Path, ...] = ()
    writable: tuple[Path, ...] = ()
    # Host or host:port entries added for this run (a repository's registries, say).
    allow_hosts: tuple[str, ...] = ()
    # The operator's (STEELFRAME_EGRESS_ALLOW) and the agent preset's model API hosts.
    configured_hosts: tuple[str, ...] = ()
    # Variables naming the model API's base URL (`ANTHROPIC_BASE_URL`): where the value
    # the run is given points is allowed too.
    url_variables: tuple[str, ...] = ()
    # host:port entries reachable even on a private or loopback address
    # (STEELFRAME_EGRESS_PRIVATE): exactly these, nothing else of the host's network.
    private_hosts: tuple[str, ...] = ()
    # A plan-first task's plan run reads the repository and changes nothing in it.
    repo_read_only: bool = False
    # A root worker's runs each run as a uid of their own from this range, held in
    # `uid_locks` (`bot.lifecycle.sandbox_uid`); None: every run is nobody.
    uid_range: UidRange | None = DEFAULT_UID_RANGE
    uid_locks: Path = sandbox_uid.LOCKS
    # The worker's own places, never shown to the runtime (the data directory, the database
    # file, the App key, the setup secrets): a path shown that holds one is refused (`wrap`).
    hidden: tuple[Path, ...] = ()

    @classmethod
    def from_settings(cls, settings: Settings) -> SandboxPolicy:
        return cls(
            enabled=settings.coding_sandbox != "off",
            network=Network(settings.coding_network),
            env_passthrough=settings.coding_env_passthrough,
            memory_mb=settings.coding_memory_mb,
            max_processes=settings.coding_max_processes,
            file_size_mb=settings.coding_file_size_mb,
            read_only=settings.coding_read_only_paths,
            writable=settings.coding_writable_paths,
            configured_hosts=settings.egress_allow,
            private_hosts=settings.egress_private,
            uid_range=settings.sandbox_uid_range,
            hidden=worker_places(settings),
        )

    def allowlist(self, env: Mapping[str, str]) -> Allowlist:
        """The run's allowlist, with the hosts of the base URLs `env` gives the runtime."""
        from_urls = [url_target(env[name]) for name in self.url_variables if env.get(name)]
        entries = [*self.configured_hosts, *self.allow_hosts]
        entries += [str(target) for target in from_urls if target is not None]
        return Allowlist.of(entries, self.private_hosts)


def worker_places(settings: Settings) -> tuple[Path, ...]:
    """What the worker keeps that the runtime must never see, as absolute paths."""
    database = make_url(settings.database_url)
    places = [settings.data_dir, settings.private_key_path, settings.setup_secrets_dir]
    if database.get_backend_name() == "sqlite" and database.database not in (None, "", ":memory:"):
        places.append(Path(database.database))
    return tuple(Path(os.path.abspath(place)) for place in places if place is not None)


@dataclass(frozen=True)
class EgressPlan:
    """The run's way out: the proxy to start on `socket` before the launch, for `allowlist`."""

    allowlist: Allowlist
    socket: Path


@dataclass(frozen=True)
class Launch:
    argv: list[str]
    env: dict[str, str]
    cwd: Path
    # Paths as the runtime sees them.
    repo: str
    prompt: str
    sandboxed: bool
    warnings: list[str] = field(default_factory=list)
    # bubblewrap's options (they carry the environment's secrets): handed over through an
    # inherited descriptor by `command()`, never on a command line (`argv` is bwrap, then
    # `--` and the command, which names no secret).
    sealed_args: tuple[str, ...] = ()
    egress: EgressPlan | None = None
    # Where in `argv` prlimit's `--nproc` (RLIMIT_NPROC) is; None once it was dropped.
    nproc_at: int | None = None
    # Where in `argv` setpriv's `--reuid=` is (a root worker's sandbox; `--regid=` follows),
    # and who that makes the runtime; None: the worker's own uid (in a user namespace).
    user_at: int | None = None
    user: sandbox_uid.RunUser | None = None
    # The run's places handed to the runtime's uid before it starts (`hand_over`).
    places: SandboxRun | None = None

    def in_own_group(self) -> Launch:
        """This launch for a run started inside a cgroup of its own, whose `pids.max` is the
        run's process limit: without RLIMIT_NPROC, which counts every process of the uid,
        and every run is `nobody`, so it would count all runs on the host together (a second
        run failed to fork). Only the run that got its group drops it: a host may allow one
        run's group and refuse the next run's."""
        if self.nproc_at is None:
            return self
        argv = [*self.argv[: self.nproc_at], *self.argv[self.nproc_at + 1 :]]
        return dataclasses.replace(self, argv=argv, nproc_at=None)

    def as_user(self, user: sandbox_uid.RunUser, passwd: Path | None = None) -> Launch:
        """This launch run as `user` (a root worker's sandbox only), with `passwd` shown as
        its /etc/passwd where the host's has no entry for the uid."""
        if self.user_at is None:
            return self
        argv = list(self.argv)
        argv[self.user_at : self.user_at + 2] = [f"--reuid={user.uid}", f"--regid={user.gid}"]
        sealed = self.sealed_args
        if passwd is not None:  # mounted over the host's copy, which came first
            sealed = (*sealed, "--ro-bind", str(passwd), "/etc/passwd")
        return dataclasses.replace(self, argv=argv, user=user, sealed_args=sealed)

    def hand_over(self) -> None:
        """As root, give the runtime's uid its repository copy and temporary folder (the
        last run's uid owned them, or the worker): just before it starts."""
        if self.places is None or self.user is None:
            return
        run, uid, gid = self.places, self.user.uid, self.user.gid
        for top in (run.repo, run.tmp, *([run.home] if run.home is not None else [])):
            os.chown(top, uid, gid)
            for folder, dirs, files in os.walk(top):
                for name in (*dirs, *files):
                    os.lchown(os.path.join(folder, name), uid, gid)
        os.chmod(run.prompt, 0o644)

    @contextlib.contextmanager
    def command(self) -> Iterator[tuple[list[str], tuple[int, ...]]]:
        """The argv to exec and the descriptors it must inherit (`pass_fds`)."""
        if not self.sealed_args:
            yield self.argv, ()
            return
        fd = os.memfd_create("steelframe-sandbox-args", os.MFD_CLOEXEC)
        try:
            data = memoryview(b"".join(arg.encode() + b"\0" for arg in self.sealed_args))
            while data:
                data = data[os.write(fd, data) :]
            os.lseek(fd, 0, os.SEEK_SET)
            yield [self.argv[0], "--args", str(fd), *self.argv[1:]], (fd,)
        finally:
            os.close(fd)


def allowed_env(
    base: Mapping[str, str], policy: SandboxPolicy, extra: Mapping[str, str]
) -> dict[str, str]:
    """The allowlist: PATH, locale, the operator's named variables, then `extra`."""
    env = {
        name: value
        for name, value in base.items()
        if name in ALLOWED_ENV
        or name.startswith(ALLOWED_ENV_PREFIXES)
        or name in policy.env_passthrough
        or (policy.env_prefixes and name.startswith(policy.env_prefixes))
    }
    env.setdefault("PATH", "/usr/local/bin:/usr/bin:/bin")
    env.update(extra)
    return env


NPROC_AT = 2  # `--nproc` in `_limits`: after prlimit and `--data`
DROP_USER_AT = 1  # `--reuid=` in `_identity`'s setpriv prefix: after setpriv


def _limits(policy: SandboxPolicy) -> list[str]:
    """prlimit's options; `--nproc` stays unless the run gets its own cgroup when it starts
    (`Launch.in_own_group`)."""
    prlimit = shutil.which("prlimit") or "/usr/bin/prlimit"
    data = policy.memory_mb * 1024 * 1024
    size = policy.file_size_mb * 1024 * 1024
    nproc = f"--nproc={policy.max_processes}"
    return [prlimit, f"--data={data}", nproc, f"--fsize={size}", "--"]


def _relay(plan: EgressPlan) -> list[str]:
    """The command that starts the relay and then becomes the runtime."""
    forwards = [str(t) for t in sorted(plan.allowlist.private) if _loopback(t)]
    interpreter = os.path.realpath(sys.executable)
    return [interpreter, "-I", "-S", INSIDE_RELAY, INSIDE_EGRESS_SOCKET, *forwards, "--"]


def _loopback(target: Target) -> bool:
    address = target.address
    return address is not None and address.is_loopback


def _identity() -> tuple[list[str], list[str]]:
    """Namespace options and the command prefix that sets who the runtime is (as root:
    nobody, until `Launch.as_user` names the run's own uid)."""
    if os.geteuid() == 0:
        # No user namespace: bwrap keeps only the capabilities setpriv needs to become
        # nobody, which drops them all before the runtime starts.
        caps = ["--cap-drop", "ALL"]
        caps += ["--cap-add", "CAP_SETUID", "--cap-add", "CAP_SETGID", "--cap-add", "CAP_SETPCAP"]
        setpriv = shutil.which("setpriv") or "/usr/bin/setpriv"
        drop = [
            setpriv,
            f"--reuid={UNPRIVILEGED_ID}",
            f"--regid={UNPRIVILEGED_ID}",
            "--clear-groups",
            "--inh-caps=-all",
            "--bounding-set=-all",
            "--",
        ]
        return caps, drop
    uid, gid = os.getuid(), os.getgid()
    # Nested user namespaces stay allowed: Codex sandboxes its own commands with bubblewrap.
    userns = ["--unshare-user", "--uid", str(uid), "--gid", str(gid)]
    return [*userns, "--cap-drop", "ALL"], []


def bwrap_args(
    policy: SandboxPolicy, run: SandboxRun, env: Mapping[str, str], egress: EgressPlan | None
) -> list[str]:
    """bubblewrap's options (its program and its command are not among them)."""
    namespaces, _ = _identity()
    args = [*namespaces, "--unshare-pid", "--unshare-ipc", "--unshare-uts", "--unshare-net"]
    args += ["--unshare-cgroup-try", "--hostname", "steelframe-sandbox"]
    args += ["--die-with-parent", "--new-session", "--clearenv"]
    for name, value in env.items():
        args += ["--setenv", name, value]
    args += mounts(
        run,
        read_only=policy.read_only,
        writable=policy.writable,
        repo_read_only=policy.repo_read_only,
    )
    if egress is not None:
        made = {"/usr", *(str(p) for p in (*policy.read_only, *policy.writable))}
        args += egress_mounts(egress.socket, made)
    return [*args, "--chdir", INSIDE_REPO]


def _visible(policy: SandboxPolicy, program: str) -> bool:
    path = Path(program)
    if not path.is_absolute():
        return True  # looked up on PATH inside
    roots = [Path(p) for p in (*SYSTEM_DIRS, *SYSTEM_LINKS)]
    roots += [*policy.read_only, *policy.writable]
    return any(path == root or path.is_relative_to(root) for root in roots)


def _exposed(policy: SandboxPolicy) -> str | None:
    """Why a path the runtime would be shown holds one of the worker's own places, or None.
    Resolved: a symlink to the data directory would show it too."""
    shown = [
        *((Path(p), "the read-only system") for p in (*SYSTEM_DIRS, *ETC_FILES)),
        *(
            (p, "read-only: STEELFRAME_CODING_READ_ONLY_PATHS, or where a preset runs from")
            for p in policy.read_only
        ),
        *((p, "writable: STEELFRAME_CODING_WRITABLE_PATHS") for p in policy.writable),
    ]
    if policy.network == Network.ALLOWLIST:  # the egress relay's interpreter
        shown.append((Path(sys.base_prefix), "the egress relay's interpreter"))
    for place in policy.hidden:
        real = place.resolve()
        for path, why in shown:
            if real == path.resolve() or real.is_relative_to(path.resolve()):
                return (
                    f"the coding sandbox would show {path} ({why}), which holds {place}: the "
                    "worker's own (its data directory, database, App key or setup secrets), "
                    "for the coding runtime to read. Move it out, or name a narrower path"
                )
    return None


def wrap(
    policy: SandboxPolicy,
    run: SandboxRun,
    argv: Sequence[str],
    extra_env: Mapping[str, str],
    *,
    base_env: Mapping[str, str] | None = None,
) -> Launch:
    """The argv and environment that run `argv` for this run, isolated per `policy`.

    `extra_env` is what the run adds (task ids, resume data); `base_env` the worker's
    environment (`WorkerEnvironment.variables`, read at its start) that the allowlist
    (`allowed_env`) takes from; this process's only for a caller without a worker (the
    host's checks, tests). The prompt file's path as the runtime sees it is `Launch.prompt`
    (and in `STEELFRAME_PROMPT_FILE`)."""
    if not argv:
        raise ValueError("the coding command is empty")
    base = os.environ if base_env is None else base_env
    run.tmp.mkdir(parents=True, exist_ok=True)
    if not policy.enabled:
        return _unsandboxed(policy, run, argv, allowed_env(base, policy, extra_env))
    if not _visible(policy, argv[0]):
        raise SandboxUnavailable(
            f"the coding command {argv[0]} is outside the sandbox's read-only system: add "
            "its installation folder to STEELFRAME_CODING_READ_ONLY_PATHS"
        )
    if (exposed := _exposed(policy)) is not None:
        raise SandboxUnavailable(exposed)
    bwrap = shutil.which("bwrap")
    if bwrap is None:
        raise SandboxUnavailable(f"bubblewrap (`bwrap`) is not installed: {INSTALL_HINT}")
    env = allowed_env(base, policy, extra_env)
    env.update(HOME=INSIDE_TMP, TMPDIR=INSIDE_TMP, STEELFRAME_PROMPT_FILE=INSIDE_PROMPT)
    egress = None
    if policy.network == Network.ALLOWLIST:
        egress = EgressPlan(policy.allowlist(env), run.egress_socket)
    relay = _relay(egress) if egress is not None else []
    sealed = bwrap_args(policy, run, env, egress)
    drop = _identity()[1]
    head = [bwrap, "--", *drop]
    as_root = bool(drop)
    nobody = sandbox_uid.RunUser(UNPRIVILEGED_ID, UNPRIVILEGED_ID, own=False, note="nobody")
    return Launch(
        argv=[*head, *_limits(policy), *relay, *argv],
        env={},  # bwrap itself needs nothing, and its /proc/<pid>/environ shows nothing
        cwd=run.repo,
        repo=INSIDE_REPO,
        prompt=INSIDE_PROMPT,
        sandboxed=True,
        sealed_args=tuple(sealed),
        egress=egress,
        nproc_at=len(head) + NPROC_AT,
        user_at=len(head) - len(drop) + DROP_USER_AT if as_root else None,
        user=nobody if as_root else None,
        places=run if as_root else None,
    )


def _unsandboxed(
    policy: SandboxPolicy, run: SandboxRun, argv: Sequence[str], env: dict[str, str]
) -> Launch:
    """`argv` as the worker itself, in the run's folders (STEELFRAME_CODING_SANDBOX=off)."""
    env.update(HOME=str(run.tmp), TMPDIR=str(run.tmp), STEELFRAME_PROMPT_FILE=str(run.prompt))
    return Launch(
        argv=[*_limits(policy), *argv],
        env=env,
        cwd=run.repo,
        repo=str(run.repo),
        prompt=str(run.prompt),
        sandboxed=False,
        warnings=[OFF_WARNING],
        nproc_at=NPROC_AT,
    )


@functools.lru_cache(maxsize=8)
def _probe(policy: SandboxPolicy) -> str | None:
    """None when a sandbox starts here, else why not (cached: the host does not change)."""
    if shutil.which("bwrap") is None:
        return f"bubblewrap (`bwrap`) is not installed: {INSTALL_HINT}"
    scratch = Path(os.environ.get("TMPDIR", "/tmp")) / f"steelframe-probe-{os.getpid()}"
    repo, tmp, prompt = scratch / "repo", scratch / "tmp", scratch / "prompt.md"
    try:
        repo.mkdir(parents=True, exist_ok=True)
        tmp.mkdir(exist_ok=True)
        prompt.write_text("probe\n")
        run = SandboxRun(repo=repo, tmp=tmp, prompt=prompt)
        launch = wrap(SandboxPolicy(network=Network.OFF), run, ["/usr/bin/true"], {})
        launch.hand_over()  # as nobody: one process, the host's answer, nothing of a run's
        with launch.command() as (argv, fds):
            done = subprocess.run(
                argv,
                env=launch.env,
                cwd=launch.cwd,
                pass_fds=fds,
                capture_output=True,
                timeout=PROBE_TIMEOUT_SECONDS,
                check=False,
            )
    except (OSError, subprocess.SubprocessError, SandboxUnavailable) as exc:
        return f"the sandbox could not start: {exc}"
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    if done.returncode != 0:
        said = done.stderr.decode(errors="replace").strip().splitlines()
        return (
            f"bubblewrap is installed but cannot create its namespaces here "
            f"({said[-1] if said else f'exit status {done.returncode}'}). In a container, "
            "allow user namespaces (Docker: `--security-opt seccomp=unconfined` or a seccomp "
            "profile that permits unshare/clone with CLONE_NEWUSER; Ubuntu 24.04 hosts: "
            "an AppArmor profile for bwrap), or run the worker as root in the container"
        )
    return None


def probe_problem(settings: Settings) -> str | None:
    """None when the settings' sandbox starts on this host, else why not (cached)."""
    return _probe(SandboxPolicy.from_settings(settings))


def ensure_available(policy: SandboxPolicy) -> list[str]:
    """Raise SandboxUnavailable if the sandbox cannot run; else the warnings to log."""
    if not policy.enabled:
        return [OFF_WARNING]
    problem = _probe(policy)
    if problem is not None:
        raise SandboxUnavailable(problem)
    return []


def status(settings: Settings) -> CodingSandbox:
    """What /healthz and the board show: the mode, and a warning when isolation is off."""
    off = settings.coding_sandbox == "off"
    return CodingSandbox(
        mode="off" if off else "bwrap",
        network="off" if settings.coding_network == Network.OFF else "allowlist",
        warning=OFF_WARNING if off else None,
    )
