"""A repository's own configuration, committed at `.steelframe/config.yml` (docs/repository-
config.md): its setup commands, test command, registries, agent and model, budget,
plan-first, reuse of past Decisions, instruction files, setup-only secret names and cache key files.

Typed and strict: YAML decoded by msgspec into frozen Structs that refuse unknown keys, so a
typo (`setpu:`) fails the run with a one-line reason instead of being ignored. `parse` takes
the file's text and raises `RepoConfigError` with that line; nothing here reads a file.
"""

from __future__ import annotations

import fnmatch
import ipaddress
import math
import re
from dataclasses import dataclass
from enum import StrEnum
from typing import Annotated

import msgspec
import msgspec.yaml

from bot.lifecycle.egress_policy import unreachable_reason

CONFIG_PATH = ".steelframe/config.yml"
# A config this big is not a config.
MAX_CONFIG_BYTES = 64 * 1024
# Lockfiles that say what setup installs: their contents key the setup cache.
DEFAULT_KEY_FILES = (
    "package-lock.json",
    "yarn.lock",
    "pnpm-lock.yaml",
    "poetry.lock",
    "uv.lock",
    "requirements*.txt",
    "Pipfile.lock",
    "Cargo.lock",
    "go.sum",
    "Gemfile.lock",
)
_HOST_LABEL = re.compile(r"(?!-)[A-Za-z0-9-]{1,63}(?<!-)")
_ENV_NAME = re.compile(r"[A-Z_][A-Z0-9_]{0,99}")
# Names that always mean this machine (RFC 6761), whatever DNS says.
_LOCAL_NAMES = ("localhost", "localhost.localdomain", "ip6-localhost", "ip6-loopback")

Command = Annotated[str, msgspec.Meta(min_length=1, max_length=4000)]
Text = Annotated[str, msgspec.Meta(min_length=1, max_length=300)]


class RepoConfigError(ValueError):
    """The repository's config is wrong; the message is one line a person can act on."""


class RepoAgent(StrEnum):
    """The coding agents a repository may ask for (the presets; never an operator's own
    command or the demo)."""

    CLAUDE = "claude"
    CODEX = "codex"
    AIDER = "aider"


# Every section refuses keys it does not know.
class Network(msgspec.Struct, frozen=True, forbid_unknown_fields=True, kw_only=True):
    # host or host:port the run may reach, added to the run's egress allowlist.
    allow: Annotated[tuple[Text, ...], msgspec.Meta(max_length=50)] = ()

    def __post_init__(self) -> None:
        for entry in self.allow:
            check_host(entry)


class Budget(msgspec.Struct, frozen=True, forbid_unknown_fields=True, kw_only=True):
    """Per-task budget, overriding the installation's (enforced by `bot.lifecycle.budget`)."""

    tokens: Annotated[int, msgspec.Meta(ge=0)] | None = None
    usd: Annotated[float, msgspec.Meta(ge=0)] | None = None

    def __post_init__(self) -> None:
        # YAML's `.inf` is a float >= 0: refused as the settings refuse it, since the run's
        # policy carries this budget to a preset agent (`--max-budget-usd inf`).
        if self.usd is not None and not math.isfinite(self.usd):
            raise ValueError("budget.usd must be a finite amount of USD")


class Decisions(msgspec.Struct, frozen=True, forbid_unknown_fields=True, kw_only=True):
    """Reusing past Decisions (bot.lifecycle.auto_resume): off unless the repository opts in.
    With `auto_resume`, a question at least `min_score` alike (tf-idf cosine) to one a
    standing Decision answered is answered by that Decision, published by Steelframe."""

    auto_resume: bool = False
    # Strict by design: below 0.8 two questions are not the same question.
    min_score: Annotated[float, msgspec.Meta(ge=0.8, le=1.0)] = 0.9


class Cache(msgspec.Struct, frozen=True, forbid_unknown_fields=True, kw_only=True):
    # Patterns of the files whose contents key the setup cache; a pattern without a `/`
    # matches a file of that name in any folder.
    key_files: Annotated[tuple[Text, ...], msgspec.Meta(max_length=50)] = DEFAULT_KEY_FILES


class RepoConfig(msgspec.Struct, frozen=True, forbid_unknown_fields=True, kw_only=True):
    setup: Annotated[tuple[Command, ...], msgspec.Meta(max_length=20)] = ()
    test: Command | None = None
    network: Network = msgspec.field(default_factory=Network)
    agent: RepoAgent | None = None
    model: Annotated[str, msgspec.Meta(pattern=r"^[A-Za-z0-9._:/@-]{1,200}$")] | None = None
    budget: Budget = msgspec.field(default_factory=Budget)
    plan_first: bool = False
    decisions: Decisions = msgspec.field(default_factory=Decisions)
    instructions: Annotated[tuple[Text, ...], msgspec.Meta(max_length=20)] = ()
    setup_secrets: Annotated[tuple[Text, ...], msgspec.Meta(max_length=20)] = ()
    cache: Cache = msgspec.field(default_factory=Cache)

    def __post_init__(self) -> None:
        for path in self.instructions:
            check_relative(path)
        for name in self.setup_secrets:
            if not _ENV_NAME.fullmatch(name):
                raise ValueError(f"setup secret name {name!r} is not an environment variable name")
        if self.setup_secrets and not self.setup:
            raise ValueError("setup_secrets names secrets but there are no setup commands")


class SetupState(StrEnum):
    NONE = "none"  # the config names no setup
    CACHED = "cached"  # restored from the setup cache
    RAN = "ran"


@dataclass(frozen=True)
class RepoEnv:
    """What a run learned and made of the repository's environment before its agent
    started: the config, the instruction text for the prompt, what happened to setup
    and setup's output for the operator's log."""

    config: RepoConfig
    instructions: str = ""
    setup: SetupState = SetupState.NONE
    setup_log: str = ""
    # Setup's time counts against the task's wall-clock limit: the agent gets the rest.
    setup_seconds: float = 0.0


# What a repository without a config file gets: no setup, no test, the installation's
# defaults for everything else.
DEFAULT = RepoConfig()


def parse(text: str | bytes) -> RepoConfig:
    """The config in `text`, or RepoConfigError with one line saying what is wrong."""
    if len(text) > MAX_CONFIG_BYTES:
        raise RepoConfigError(f"{CONFIG_PATH} is larger than {MAX_CONFIG_BYTES // 1024} KiB")
    try:
        data = msgspec.yaml.decode(text)
    except msgspec.DecodeError as exc:
        raise RepoConfigError(f"{CONFIG_PATH} is not valid YAML: {_one_line(str(exc))}") from exc
    if data is None:  # empty, or only comments
        return DEFAULT
    try:
        return msgspec.convert(data, type=RepoConfig)
    except msgspec.ValidationError as exc:
        raise RepoConfigError(f"{CONFIG_PATH}: {_one_line(str(exc))}") from exc


def _one_line(text: str) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= 240 else flat[:239] + "…"


def split_host(entry: str) -> tuple[str, int | None]:
    """`host`, `host:port` or `[v6]:port` as (host, port or None)."""
    host, port_text = entry, ""
    if entry.startswith("["):
        host, _, rest = entry[1:].partition("]")
        if rest and not rest.startswith(":"):
            raise ValueError(f"network.allow entry {entry!r} is not host or host:port")
        port_text = rest[1:]
    elif entry.count(":") == 1:
        host, _, port_text = entry.partition(":")
    if port_text:
        if not port_text.isdigit() or not 0 < int(port_text) < 65536:
            raise ValueError(f"network.allow entry {entry!r} has no valid port")
        return host, int(port_text)
    return host, None


def check_host(entry: str) -> None:
    """A registry the run may reach: a public host name or address, never this machine or
    a private, loopback, link-local or otherwise special range (the egress proxy refuses
    those whatever the list says; a config asking for them is refused outright)."""
    host, _ = split_host(entry)
    try:
        address = ipaddress.ip_address(host)
    except ValueError:
        address = None
    if address is not None:
        # The proxy's own judgement (an IPv4 address inside an IPv6 one, site-local...), not
        # `is_global`, which differs between Python versions (3.11 calls 6to4 loopback public).
        reason = unreachable_reason(address)
        if reason is not None:
            raise ValueError(
                f"network.allow entry {entry!r} is a {reason} address, never reached from a run"
            )
        return
    name = host.rstrip(".").lower()
    labels = name.split(".")
    if not name or len(name) > 253 or not all(_HOST_LABEL.fullmatch(p) for p in labels):
        raise ValueError(f"network.allow entry {entry!r} is not a host name")
    if name in _LOCAL_NAMES or name.endswith((".localhost", ".local", ".internal")):
        raise ValueError(f"network.allow entry {entry!r} names this machine or a private network")
    if labels[-1].isdigit():
        raise ValueError(f"network.allow entry {entry!r} is not a host name")


def check_relative(path: str) -> None:
    """A path inside the repository: relative, no `..`, no backslash."""
    parts = path.split("/")
    if path.startswith("/") or "\\" in path or any(p in ("..", "") for p in parts):
        raise ValueError(f"instruction file {path!r} is not a path inside the repository")


def matches_key_file(path: str, patterns: tuple[str, ...]) -> bool:
    """Whether a repository path is one of the cache's key files: a pattern with a `/`
    matches the whole path, one without matches the file's name in any folder."""
    name = path.rsplit("/", 1)[-1]
    return any(fnmatch.fnmatchcase(path if "/" in p else name, p) for p in patterns)
