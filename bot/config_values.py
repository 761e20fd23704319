"""How a setting is read: its parser, the secret wrapper, and `setting(...)`, which declares a
`Settings` field with its variable (bot.config). Every parser raises ValueError (or
TypeError) with a reason; bot.config names the variable in the ConfigError."""

from __future__ import annotations

import json
import os
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar
from urllib.parse import urlsplit, urlunsplit

from bot.host_entries import parse_entry

RUNTIMES = ("offline", "openai", "anthropic", "command")
SANDBOXES = ("bwrap", "off")
# Coding agents the worker knows how to drive (docs/runtimes.md, "Coding agents").
CODING_AGENTS = ("demo", "command", "claude", "codex", "aider")
# The agents a repository's own config may ask for (docs/repository-config.md).
REPO_AGENTS = ("claude", "codex", "aider")


class ConfigError(Exception):
    """A setting is unknown or malformed; the message names the variable."""


class Secret:
    """A string that never shows itself in repr() or str()."""

    __slots__ = ("_value",)

    def __init__(self, value: str) -> None:
        self._value = value

    def reveal(self) -> str:
        return self._value

    def __repr__(self) -> str:
        return "Secret('**********')"

    __str__ = __repr__

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Secret) and other._value == self._value

    def __hash__(self) -> int:
        return hash(self._value)

    def __bool__(self) -> bool:
        return bool(self._value)


def parse_str(value: str) -> str:
    return value


def parse_positive_int(value: str) -> int:
    number = int(value)
    if number <= 0:
        raise ValueError("must be a positive integer")
    return number


def parse_float(value: str) -> float:
    return float(value)


def parse_positive_float(value: str) -> float:
    number = float(value)
    if not 0 < number < float("inf"):  # also refuses nan
        raise ValueError("must be a positive, finite number")
    return number


def mask_url_password(url: str) -> str:
    try:
        parsed = urlsplit(url)
        password = parsed.password
    except ValueError:  # not even a URL: show nothing of it rather than a secret
        return "(unparseable URL)"
    if password is None:
        return url
    netloc = parsed.netloc.replace(f":{password}@", ":***@", 1)
    return urlunsplit(parsed._replace(netloc=netloc))


def parse_non_negative_int(value: str) -> int:
    number = int(value)
    if number < 0:
        raise ValueError("must be zero or a positive integer")
    return number


def parse_budget_tokens(value: str) -> int:
    """A budget in tokens: 0 means "no coding runs"; negative or not a number is refused."""
    number = int(value)
    if number < 0:
        raise ValueError("must be 0 or more tokens")
    return number


def parse_budget_usd(value: str) -> float:
    number = float(value)
    if not 0 <= number < float("inf"):  # also refuses nan
        raise ValueError("must be 0 or more, a finite amount")
    return number


def parse_port(value: str) -> int:
    number = int(value)
    if not 0 <= number <= 65535:
        raise ValueError("must be a port number from 0 to 65535")
    return number


def parse_host(value: str) -> str:
    if not value or "/" in value or "://" in value:
        raise ValueError("must be a host name such as github.example.com, without a scheme")
    return value


def parse_protocol(value: str) -> str:
    if value not in {"http", "https"}:
        raise ValueError("must be http or https")
    return value


def parse_public_url(value: str) -> str:
    parts = urlsplit(value)
    if parts.scheme not in {"http", "https"} or not parts.netloc or parts.path not in {"", "/"}:
        raise ValueError("must be an origin such as https://steelframe.example.com, no path")
    return f"{parts.scheme}://{parts.netloc}"


def parse_log_format(value: str) -> str:
    if value not in {"text", "json"}:
        raise ValueError("must be text or json")
    return value


def parse_bool(value: str) -> bool:
    lowered = value.strip().lower()
    if lowered in {"1", "true", "yes", "on"}:
        return True
    if lowered in {"0", "false", "no", "off"}:
        return False
    raise ValueError("must be true or false")


_J = TypeVar("_J")


def _one_of(choices: tuple[str, ...]) -> Callable[[str], str]:
    """A parser that takes only one of `choices` (its error lists them)."""

    def parse(value: str) -> str:
        if value not in choices:
            raise ValueError(f"must be one of {', '.join(choices)}")
        return value

    return parse


parse_coding_agent = _one_of(CODING_AGENTS)
parse_runtime = _one_of(RUNTIMES)
parse_sandbox = _one_of(SANDBOXES)


def _comma_list(value: str) -> tuple[str, ...]:
    return tuple(item.strip() for item in value.split(",") if item.strip())


def parse_repo_agents(value: str) -> tuple[str, ...]:
    agents = _comma_list(value)
    for agent in agents:
        if agent not in REPO_AGENTS:
            raise ValueError(f"{agent!r} is not one of {', '.join(REPO_AGENTS)}")
    return agents


# The coding run's network: `allowlist` (the default) or `off`; the old true/false still work.
_NETWORK_MODES = {"allowlist": "allowlist", "off": "off"}
_NETWORK_MODES |= dict.fromkeys(("1", "true", "yes", "on"), "allowlist")
_NETWORK_MODES |= dict.fromkeys(("0", "false", "no"), "off")


def parse_network(value: str) -> str:
    mode = _NETWORK_MODES.get(value.strip().lower())
    if mode is None:
        raise ValueError("must be allowlist or off")
    return mode


def parse_egress_hosts(value: str) -> tuple[str, ...]:
    entries = _comma_list(value)
    for entry in entries:
        parse_entry(entry)  # BadTarget (a ValueError) names the entry
    return entries


def parse_egress_private(value: str) -> tuple[str, ...]:
    entries = _comma_list(value)
    for entry in entries:
        parse_entry(entry, port_required=True)
    return entries


# uids that are never a run's own: root, nobody (shared by everything that drops to it) and
# (uid_t)-1 in 16 bits.
_SHARED_UIDS = (0, 65534, 65535)
_UID_MAX = 2**31 - 2  # above, tools that keep uids as signed ints misread them


@dataclass(frozen=True)
class UidRange:
    """STEELFRAME_SANDBOX_UID_RANGE: the uids a root worker gives its sandboxed runs, one
    of its own to each run at a time (`bot.lifecycle.sandbox_uid`). Inclusive."""

    start: int
    end: int

    def __str__(self) -> str:
        return f"{self.start}-{self.end}"

    def __len__(self) -> int:
        return self.end - self.start + 1

    def __iter__(self) -> Iterator[int]:
        return iter(range(self.start, self.end + 1))

    def __contains__(self, uid: object) -> bool:
        return isinstance(uid, int) and self.start <= uid <= self.end


# systemd's table of uids (systemd.io/UIDS-GIDS) leaves 60578-61183 unused: above what
# useradd hands out (60000), below its dynamic service users (61184), and inside the 65536
# uids a rootless or userns-remapped container maps.
DEFAULT_UID_RANGE = UidRange(60600, 60999)


def parse_uid_range(value: str) -> UidRange | None:
    """`START-END` (inclusive), or `off`: every run is nobody (65534), as before."""
    text = value.strip()
    if text.lower() == "off":
        return None
    start, dash, end = text.partition("-")
    if not dash or not start.strip().isdigit() or not end.strip().isdigit():
        raise ValueError("must be START-END (two uids, e.g. 60600-60999) or off")
    uids = UidRange(int(start), int(end))
    if uids.start > uids.end:
        raise ValueError(f"starts after it ends ({uids.start} > {uids.end})")
    if uids.end > _UID_MAX:
        raise ValueError(f"uids above {_UID_MAX} are misread by tools that keep them signed")
    shared = [uid for uid in _SHARED_UIDS if uids.start <= uid <= uids.end]
    if shared:
        raise ValueError(
            f"includes uid {shared[0]}, which is never a run's own (root, nobody, (uid_t)-1)"
        )
    return uids


# The task lifecycle's RQ queue when STEELFRAME_TASK_QUEUE does not name one.
DEFAULT_TASK_QUEUE = "steelframe-lifecycle"
_QUEUE_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._:-]{0,99}")


def parse_queue_name(value: str) -> str:
    name = value.strip()
    if not _QUEUE_NAME.fullmatch(name):
        raise ValueError(
            "must be 1-100 letters, digits, '.', '_', ':' or '-', starting with a letter or digit"
        )
    return name


def parse_labels(value: str) -> tuple[str, ...]:
    labels = _comma_list(value)
    if not labels:
        raise ValueError("must name at least one label")
    return labels


def parse_repo(value: str) -> str:
    owner, _, name = value.partition("/")
    if not owner or not name or "/" in name:
        raise ValueError("must look like owner/name")
    return value


def parse_json_list(value: str) -> list[Any]:
    return _json_of(list, value, "must be a JSON list")


def parse_json_object(value: str) -> dict[str, Any]:
    return _json_of(dict, value, "must be a JSON object")


def _json_of(kind: type[_J], value: str, wrong: str) -> _J:
    parsed = json.loads(value)
    if not isinstance(parsed, kind):
        raise ValueError(wrong)
    return parsed


def parse_names(value: str) -> tuple[str, ...]:
    names = _comma_list(value)
    for name in names:
        if not name.replace("_", "").isalnum() or name[0].isdigit():
            raise ValueError(f"{name!r} is not an environment variable name")
    return names


def parse_paths(value: str) -> tuple[Path, ...]:
    paths = tuple(Path(part) for part in value.split(os.pathsep) if part.strip())
    for path in paths:
        if not path.is_absolute():
            raise ValueError(f"{str(path)!r} is not an absolute path")
    return paths


# Scheme aliases other tools print (Heroku, docker images) for the drivers we ship.
_POSTGRES_ALIASES = {"postgres", "postgresql+psycopg2", "postgres+psycopg"}


def parse_redis_url(value: str) -> str:
    """A Redis URL redis-py can open (redis://, rediss:// or unix://): another scheme ended in
    redis-py's ValueError traceback at the first connection, not this variable's name."""
    scheme, separator, rest = value.strip().partition("://")
    if not separator or scheme not in ("redis", "rediss", "unix") or not rest:
        raise ValueError(
            "is not a Redis URL (expected redis://[:password@]host:6379/0, rediss://... "
            "or unix:///path/to/redis.sock)"
        )
    return value.strip()


def parse_database_url(value: str) -> str:
    """A database URL for SQLite or PostgreSQL; `postgres://` means psycopg 3, and a
    relative SQLite path is made absolute (a coding run or worker may change directory).
    Read without SQLAlchemy, so `--help` stays light; the engine checks the rest."""
    scheme, separator, rest = value.strip().partition("://")
    if not separator or not scheme:
        raise ValueError(
            "is not a database URL (expected sqlite:///path/to/file.db or "
            "postgresql://user:password@host:5432/database)"
        )
    if scheme in _POSTGRES_ALIASES:
        scheme = "postgresql+psycopg"
    backend = scheme.partition("+")[0]
    if backend not in ("sqlite", "postgresql"):
        raise ValueError(f"{backend!r} is not supported: use sqlite:/// or postgresql://")
    if backend == "sqlite" and rest.startswith("/") and rest not in ("/", "/:memory:"):
        path, query_mark, query = rest[1:].partition("?")
        rest = "/" + str(Path(path).expanduser().resolve()) + query_mark + query
    return f"{scheme}://{rest}"


def parse_secret(value: str) -> Secret:
    return Secret(value)


@dataclass(frozen=True)
class SettingSpec:
    """How one setting is read: its variable, its parser and one line of help."""

    env: str
    attr: str
    parse: Callable[[str], Any]
    help: str
    default: Any
    secret: bool
    aliases: tuple[str, ...] = ()


def setting(
    env: str,
    parse: Callable[[str], Any],
    help: str,
    default: Any = None,
    *,
    aliases: tuple[str, ...] = (),
) -> Any:
    """Declare a `Settings` field together with the variable that sets it (one place each).

    `aliases` are other names that set it (Probot's, for instance); the main name wins."""
    meta = {"env": env, "parse": parse, "help": help, "aliases": aliases}
    if isinstance(default, list | dict):
        factory = type(default)
        return field(default_factory=factory, metadata=meta)
    return field(default=default, metadata=meta)
