"""Settings: read once per entry point from the environment (plus an optional steelframe.toml).

Every known variable is declared in `FIELDS`; an unknown `STEELFRAME_*` variable, an unknown
key in the TOML file or a value that does not parse stops start-up with a `ConfigError` that
names the variable. Secrets are wrapped in `Secret` so they never show in a repr or a log.
"""

from __future__ import annotations

import base64
import json
import os
import tomllib
from collections.abc import Callable, Mapping
from dataclasses import MISSING, dataclass, field, fields
from pathlib import Path
from typing import Any, TypeVar
from urllib.parse import urlsplit, urlunsplit

from bot.lifecycle.egress_policy import parse_entry

DEFAULT_DATA_DIR = Path("var")
# Every command in a checkout (serve, dev, worker, webhooks, memory...) uses the same file
# under the data directory unless STEELFRAME_DATABASE_URL says otherwise.
DEFAULT_DATABASE_FILE = "steelframe.db"
DEFAULT_DATABASE_URL = f"sqlite:///{DEFAULT_DATA_DIR / DEFAULT_DATABASE_FILE}"
DEFAULT_PICKUP_LABELS = ("steelframe:work-on-this",)
DEFAULT_CHAT_MAX_BODY = 64 * 1024
DEFAULT_WEBHOOK_MAX_BODY = 25 * 1024 * 1024  # GitHub caps webhook payloads at 25 MB.
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


@dataclass(frozen=True)
class AgentConfig:
    """A named agent: a repository, its read-only checkout and the runtime that answers."""

    name: str
    repo: str
    checkout: Path
    runtime: str


def _str(value: str) -> str:
    return value


def _positive_int(value: str) -> int:
    number = int(value)
    if number <= 0:
        raise ValueError("must be a positive integer")
    return number


def _float(value: str) -> float:
    return float(value)


def _budget_tokens(value: str) -> int:
    """A budget in tokens: 0 means "no coding runs"; negative or not a number is refused."""
    number = int(value)
    if number < 0:
        raise ValueError("must be 0 or more tokens")
    return number


def _budget_usd(value: str) -> float:
    number = float(value)
    if not 0 <= number < float("inf"):  # also refuses nan
        raise ValueError("must be 0 or more, a finite amount")
    return number


def _positive_float(value: str) -> float:
    number = float(value)
    if not 0 < number < float("inf"):  # also refuses nan
        raise ValueError("must be a positive, finite number")
    return number


def _mask_url_password(url: str) -> str:
    try:
        parsed = urlsplit(url)
        password = parsed.password
    except ValueError:  # not even a URL: show nothing of it rather than a secret
        return "(unparseable URL)"
    if password is None:
        return url
    netloc = parsed.netloc.replace(f":{password}@", ":***@", 1)
    return urlunsplit(parsed._replace(netloc=netloc))


def _non_negative_int(value: str) -> int:
    number = int(value)
    if number < 0:
        raise ValueError("must be zero or a positive integer")
    return number


def _port(value: str) -> int:
    number = int(value)
    if not 0 <= number <= 65535:
        raise ValueError("must be a port number from 0 to 65535")
    return number


def _host(value: str) -> str:
    if not value or "/" in value or "://" in value:
        raise ValueError("must be a host name such as github.example.com, without a scheme")
    return value


def _protocol(value: str) -> str:
    if value not in {"http", "https"}:
        raise ValueError("must be http or https")
    return value


def _public_url(value: str) -> str:
    parts = urlsplit(value)
    if parts.scheme not in {"http", "https"} or not parts.netloc or parts.path not in {"", "/"}:
        raise ValueError("must be an origin such as https://steelframe.example.com, no path")
    return f"{parts.scheme}://{parts.netloc}"


def _log_format(value: str) -> str:
    if value not in {"text", "json"}:
        raise ValueError("must be text or json")
    return value


def _bool(value: str) -> bool:
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


_coding_agent = _one_of(CODING_AGENTS)
_runtime = _one_of(RUNTIMES)
_sandbox = _one_of(SANDBOXES)


def _comma_list(value: str) -> tuple[str, ...]:
    return tuple(item.strip() for item in value.split(",") if item.strip())


def _repo_agents(value: str) -> tuple[str, ...]:
    agents = _comma_list(value)
    for agent in agents:
        if agent not in REPO_AGENTS:
            raise ValueError(f"{agent!r} is not one of {', '.join(REPO_AGENTS)}")
    return agents


# The coding run's network: `allowlist` (the default) or `off`; the old true/false still work.
_NETWORK_MODES = {"allowlist": "allowlist", "off": "off"}
_NETWORK_MODES |= dict.fromkeys(("1", "true", "yes", "on"), "allowlist")
_NETWORK_MODES |= dict.fromkeys(("0", "false", "no"), "off")


def _network(value: str) -> str:
    mode = _NETWORK_MODES.get(value.strip().lower())
    if mode is None:
        raise ValueError("must be allowlist or off")
    return mode


def _egress_hosts(value: str) -> tuple[str, ...]:
    entries = _comma_list(value)
    for entry in entries:
        parse_entry(entry)  # BadTarget (a ValueError) names the entry
    return entries


def _egress_private(value: str) -> tuple[str, ...]:
    entries = _comma_list(value)
    for entry in entries:
        parse_entry(entry, port_required=True)
    return entries


def _labels(value: str) -> tuple[str, ...]:
    labels = _comma_list(value)
    if not labels:
        raise ValueError("must name at least one label")
    return labels


def _repo(value: str) -> str:
    owner, _, name = value.partition("/")
    if not owner or not name or "/" in name:
        raise ValueError("must look like owner/name")
    return value


def _json_list(value: str) -> list[Any]:
    return _json_of(list, value, "must be a JSON list")


def _json_object(value: str) -> dict[str, Any]:
    return _json_of(dict, value, "must be a JSON object")


def _json_of(kind: type[_J], value: str, wrong: str) -> _J:
    parsed = json.loads(value)
    if not isinstance(parsed, kind):
        raise ValueError(wrong)
    return parsed


def _names(value: str) -> tuple[str, ...]:
    names = _comma_list(value)
    for name in names:
        if not name.replace("_", "").isalnum() or name[0].isdigit():
            raise ValueError(f"{name!r} is not an environment variable name")
    return names


def _paths(value: str) -> tuple[Path, ...]:
    paths = tuple(Path(part) for part in value.split(os.pathsep) if part.strip())
    for path in paths:
        if not path.is_absolute():
            raise ValueError(f"{str(path)!r} is not an absolute path")
    return paths


# Scheme aliases other tools print (Heroku, docker images) for the drivers we ship.
_POSTGRES_ALIASES = {"postgres", "postgresql+psycopg2", "postgres+psycopg"}


def _database_url(value: str) -> str:
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


def _secret(value: str) -> Secret:
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


@dataclass(frozen=True)
class Settings:
    """Every setting Steelframe reads; docs/configuration.md mirrors it (a test checks)."""

    # One `setting(...)` per field: the table's repeated shape is the declaration, written
    # once per setting (duplicates lists it; nothing here is copied logic).
    database_url: str = setting(
        "STEELFRAME_DATABASE_URL",
        _database_url,
        "SQLAlchemy URL (postgres:// accepted); default: a file in the data directory",
        DEFAULT_DATABASE_URL,
    )
    redis_url: str | None = setting(
        "STEELFRAME_REDIS_URL", _str, "Redis URL for RQ and stop signals"
    )
    runtime: str = setting("STEELFRAME_RUNTIME", _runtime, "|".join(RUNTIMES), "offline")
    model: str | None = setting("STEELFRAME_MODEL", _str, "model name for openai/anthropic")
    fallbacks: list[Any] = setting(
        "STEELFRAME_FALLBACKS", _json_list, "ordered fallback routes (JSON)", []
    )
    model_prices: dict[str, Any] = setting(
        "STEELFRAME_MODEL_PRICES", _json_object, "USD per 1M tokens", {}
    )
    context_tokens: int = setting(
        "STEELFRAME_CONTEXT_TOKENS", _positive_int, "context window", 32_000
    )
    chat_command: str | None = setting(
        "STEELFRAME_CHAT_COMMAND", _str, "command runtime: the CLI to run"
    )
    model_context: dict[str, Any] = setting(
        "STEELFRAME_MODEL_CONTEXT", _json_object, "context tokens by model", {}
    )
    model_timeout_seconds: float = setting(
        "STEELFRAME_MODEL_TIMEOUT_SECONDS", _float, "idle model wait", 120.0
    )
    model_connections: int = setting(
        "STEELFRAME_MODEL_CONNECTIONS",
        _positive_int,
        "model streams a process holds open at once",
        1000,
    )
    model_connections_per_host: int = setting(
        "STEELFRAME_MODEL_CONNECTIONS_PER_HOST",
        _non_negative_int,
        "at most this many to one provider host; 0: no cap",
        0,
    )
    tool_rounds: int = setting(
        "STEELFRAME_TOOL_ROUNDS", _non_negative_int, "repo tool rounds; 0=off", 4
    )
    thinking_tokens: int = setting(
        "STEELFRAME_THINKING_TOKENS", _non_negative_int, "anthropic thinking", 0
    )
    coding_command: str | None = setting(
        "STEELFRAME_CODING_COMMAND", _str, "worker's coding runtime"
    )
    # The coding runtime's isolation (docs/lifecycle.md, "The sandbox"): `off` runs it
    # unisolated, with a warning at every run, on /healthz and on the board.
    coding_sandbox: str = setting(
        "STEELFRAME_CODING_SANDBOX", _sandbox, "bwrap|off (off: no isolation)", "bwrap"
    )
    # --- the coding run's network (docs/lifecycle.md, "Egress"; issue 36) ---
    coding_network: str = setting(
        "STEELFRAME_CODING_NETWORK",
        _network,
        "allowlist (out only through the run's proxy, to allowed hosts) | off (no way out); "
        "true/false mean the same",
        "allowlist",
    )
    egress_allow: tuple[str, ...] = setting(
        "STEELFRAME_EGRESS_ALLOW",
        _egress_hosts,
        "hosts coding runs may reach besides the agent's model API: host[:port], "
        "comma-separated (no port: 443 and 80)",
        (),
    )
    egress_private: tuple[str, ...] = setting(
        "STEELFRAME_EGRESS_PRIVATE",
        _egress_private,
        "host:port entries coding runs may reach although private or loopback (a local "
        "model server), comma-separated",
        (),
    )
    coding_file_size_mb: int = setting(
        "STEELFRAME_CODING_FILE_SIZE_MB",
        _positive_int,
        "largest file the coding runtime may write (MB)",
        100,
    )
    coding_env_passthrough: tuple[str, ...] = setting(
        "STEELFRAME_CODING_ENV_PASSTHROUGH",
        _names,
        "variables passed to the coding runtime (its model key), comma-separated",
        (),
    )
    coding_memory_mb: int = setting(
        "STEELFRAME_CODING_MEMORY_MB", _positive_int, "coding runtime memory (data, MB)", 4096
    )
    coding_max_processes: int = setting(
        "STEELFRAME_CODING_MAX_PROCESSES", _positive_int, "coding runtime processes", 256
    )
    coding_read_only_paths: tuple[Path, ...] = setting(
        "STEELFRAME_CODING_READ_ONLY_PATHS",
        _paths,
        "extra paths the coding runtime reads (os.pathsep-separated)",
        (),
    )
    coding_writable_paths: tuple[Path, ...] = setting(
        "STEELFRAME_CODING_WRITABLE_PATHS",
        _paths,
        "extra paths the coding runtime writes (os.pathsep-separated)",
        (),
    )
    # None: `command` when STEELFRAME_CODING_COMMAND is set, else no coding runtime.
    coding_agent: str | None = setting(
        "STEELFRAME_CODING_AGENT", _coding_agent, "|".join(CODING_AGENTS)
    )
    coding_model: str | None = setting(
        "STEELFRAME_CODING_MODEL", _str, "model the coding agent uses (its own default: none)"
    )
    coding_max_turns: int = setting(
        "STEELFRAME_CODING_MAX_TURNS", _positive_int, "agent turns per run (claude)", 50
    )
    repo: str = setting(
        "STEELFRAME_REPO", _repo, "default agent repository owner/name", "steelframe-dev/sandbox"
    )
    checkout: Path = setting(
        "STEELFRAME_CHECKOUT", Path, "default agent read-only checkout", Path(".")
    )
    agents_json: dict[str, Any] = setting(
        "STEELFRAME_AGENTS", _json_object, "extra agents (JSON)", {}
    )
    pickup_labels: tuple[str, ...] = setting(
        "STEELFRAME_PICKUP_LABELS", _labels, "comma-separated", DEFAULT_PICKUP_LABELS
    )
    data_dir: Path = setting(
        "STEELFRAME_DATA_DIR", Path, "where indexes and worktrees live", DEFAULT_DATA_DIR
    )
    chat_max_body: int = setting(
        "STEELFRAME_CHAT_MAX_BODY", _positive_int, "bytes", DEFAULT_CHAT_MAX_BODY
    )
    heartbeat_seconds: float = setting(
        "STEELFRAME_HEARTBEAT_SECONDS", _positive_float, "SSE heartbeat", 15.0
    )
    turn_timeout_seconds: float = setting(
        "STEELFRAME_TURN_TIMEOUT_SECONDS", _positive_float, "per turn", 300.0
    )
    summary_idle_seconds: float = setting(
        "STEELFRAME_SUMMARY_IDLE_SECONDS",
        _positive_float,
        "idle time before a session is summarised",
        1800.0,
    )
    checkout_refresh_seconds: float = setting(
        "STEELFRAME_CHECKOUT_REFRESH_SECONDS",
        _positive_float,
        "Chat's managed clone: refresh at most this often",
        60.0,
    )
    task_time_limit: int = setting("STEELFRAME_TASK_TIME_LIMIT", _positive_int, "seconds", 1800)
    task_max_attempts: int = setting("STEELFRAME_TASK_MAX_ATTEMPTS", _positive_int, "attempts", 3)
    task_max_tokens: int | None = setting(
        "STEELFRAME_TASK_MAX_TOKENS", _budget_tokens, "tokens a task"
    )
    task_max_cost_usd: float | None = setting(
        "STEELFRAME_TASK_MAX_COST_USD", _budget_usd, "USD a task"
    )
    # A repository's spend across its tasks (docs/lifecycle.md, "Budgets"): over it, new
    # runs wait for the next day (or month) or until the operator raises the budget.
    repo_daily_max_tokens: int | None = setting(
        "STEELFRAME_REPO_DAILY_MAX_TOKENS", _budget_tokens, "tokens a repository, per UTC day"
    )
    repo_daily_max_cost_usd: float | None = setting(
        "STEELFRAME_REPO_DAILY_MAX_COST_USD", _budget_usd, "USD a repository, per UTC day"
    )
    repo_monthly_max_tokens: int | None = setting(
        "STEELFRAME_REPO_MONTHLY_MAX_TOKENS", _budget_tokens, "tokens a repository, per month"
    )
    repo_monthly_max_cost_usd: float | None = setting(
        "STEELFRAME_REPO_MONTHLY_MAX_COST_USD", _budget_usd, "USD a repository, per month"
    )
    # Every task's first run only plans (docs/lifecycle.md, "Plan-first runs"); a
    # repository's config or the `steelframe:plan-first` label asks for it per task.
    plan_first: bool = setting("STEELFRAME_PLAN_FIRST", _bool, "plan before coding", False)
    # A task whose estimate (the 90th percentile of its repository's past tasks) is above
    # this many USD plans first too: the operator approves before it spends.
    approve_above_usd: float | None = setting(
        "STEELFRAME_APPROVE_ABOVE_USD", _budget_usd, "estimated USD that asks for approval"
    )
    # A run renews its lease every third of this; a lease not renewed for this long is dead.
    task_lease_seconds: float = setting(
        "STEELFRAME_TASK_LEASE_SECONDS", _float, "run lease expiry", 60.0
    )
    # Failing CI on a task's pull request (bot.lifecycle.ci_intake): fix runs per failing
    # head commit, counting the commits fix runs pushed after it; 0 asks a person at once.
    ci_fix_runs: int = setting(
        "STEELFRAME_CI_FIX_RUNS", _non_negative_int, "fix runs per failing head commit", 2
    )
    task_retry_backoff_seconds: float = setting(
        "STEELFRAME_TASK_RETRY_BACKOFF_SECONDS",
        _float,
        "first retry delay; doubles per attempt",
        30.0,
    )
    # The repository's own environment (docs/repository-config.md): setup, its secrets
    # and cache, the test command, and which agents a repository may choose.
    setup_secrets_dir: Path | None = setting(
        "STEELFRAME_SETUP_SECRETS_DIR", Path, "folder of <owner>/<repo>.env setup-only secrets"
    )
    setup_time_limit: int = setting(
        "STEELFRAME_SETUP_TIME_LIMIT", _positive_int, "seconds all of setup may take", 600
    )
    setup_cache_keep: int = setting(
        "STEELFRAME_SETUP_CACHE_KEEP",
        _non_negative_int,
        "prepared workspaces kept per repository (0: no cache)",
        3,
    )
    test_time_limit: int = setting(
        "STEELFRAME_TEST_TIME_LIMIT", _positive_int, "seconds the test command may take", 300
    )
    repo_agents: tuple[str, ...] = setting(
        "STEELFRAME_REPO_AGENTS",
        _repo_agents,
        "agents a repository's config may choose besides the installation's (comma-separated)",
        (),
    )
    log_level: str = setting(
        "STEELFRAME_LOG_LEVEL", _str, "DEBUG|INFO|WARNING|ERROR", "INFO", aliases=("LOG_LEVEL",)
    )
    log_format: str = setting(
        "STEELFRAME_LOG_FORMAT",
        _log_format,
        "text|json: one JSON object a line, with request, delivery, task and turn ids",
        "text",
        aliases=("LOG_FORMAT",),
    )
    access_log: bool = setting(
        "STEELFRAME_ACCESS_LOG", _bool, "aiohttp's access log, one line a request", False
    )
    metrics_token: Secret | None = setting(
        "STEELFRAME_METRICS_TOKEN",
        _secret,
        "bearer token for /metrics, always required; unset: nobody may scrape",
    )
    host: str = setting("HOST", _str, "address `serve` and `dev` listen on", "127.0.0.1")
    port: int = setting("PORT", _port, "port `serve` and `dev` listen on (0: any free)", 8080)
    # Behind a TLS-terminating proxy the service sees http and the proxy's host; browsers see
    # this origin. Forwarded headers are not trusted: anyone can send them.
    public_url: str | None = setting(
        "STEELFRAME_PUBLIC_URL", _public_url, "origin browsers reach the service at, behind a proxy"
    )
    # Hardening (issue 35): throttled authentication failures.
    auth_free_failures: int = setting(
        "STEELFRAME_AUTH_FREE_FAILURES",
        _positive_int,
        "failed authentications per client address or token prefix before backoff",
        10,
    )
    auth_backoff_ceiling_seconds: float = setting(
        "STEELFRAME_AUTH_BACKOFF_CEILING_SECONDS",
        _positive_float,
        "longest wait (Retry-After) after failed authentications",
        60.0,
    )
    openai_base_url: str = setting(
        "OPENAI_BASE_URL", _str, "OpenAI-compatible base URL", "https://api.openai.com/v1"
    )
    openai_api_key: Secret | None = setting("OPENAI_API_KEY", _secret, "secret")
    anthropic_base_url: str = setting(
        "ANTHROPIC_BASE_URL", _str, "Anthropic base URL", "https://api.anthropic.com"
    )
    anthropic_api_key: Secret | None = setting("ANTHROPIC_API_KEY", _secret, "secret")
    app_id: int | None = setting("APP_ID", _positive_int, "GitHub App id")
    private_key: Secret | None = setting("PRIVATE_KEY", _secret, "PEM of the App's private key")
    private_key_path: Path | None = setting("PRIVATE_KEY_PATH", Path, "path to that PEM")
    webhook_secret: Secret | None = setting("WEBHOOK_SECRET", _secret, "webhook HMAC secret")
    github_api_url: str = setting(
        "GITHUB_API_URL", _str, "GitHub REST base URL", "https://api.github.com"
    )
    ghe_host: str | None = setting(
        "GHE_HOST", _host, "GitHub Enterprise host; sets the API URL unless GITHUB_API_URL does"
    )
    ghe_protocol: str = setting("GHE_PROTOCOL", _protocol, "http|https for GHE_HOST", "https")
    webhook_proxy_url: str | None = setting(
        "WEBHOOK_PROXY_URL", _str, "a smee.io-style relay to receive webhooks through"
    )
    # GitHub asks for at least 1 s between content-creating requests per installation.
    github_write_interval: float = setting(
        "STEELFRAME_GITHUB_WRITE_INTERVAL", _float, "seconds between writes per installation", 1.0
    )
    # Issue 36 (what a coding run can reach): Redis auth, the push limit.
    redis_allow_unauthenticated: bool = setting(
        "STEELFRAME_REDIS_ALLOW_UNAUTHENTICATED",
        _bool,
        "let serve and worker use a Redis off loopback without a password",
        False,
    )
    push_max_bytes: int = setting(
        "STEELFRAME_PUSH_MAX_BYTES",
        _positive_int,
        "largest change a run may push: bytes of its new files, in total",
        50 * 1024 * 1024,
    )
    push_max_file_bytes: int = setting(
        "STEELFRAME_PUSH_MAX_FILE_BYTES",
        _positive_int,
        "largest single file a run may push, in bytes",
        20 * 1024 * 1024,
    )
    # -- grounding (bot/chat/retrieval.py, bot/chat/search_words.py) --
    # Rounds 2 and 3 also search with words the model proposes: one short extra model call
    # per turn (docs/memory.md). Off by default for that cost; the offline runtime never asks.
    chat_model_search_words: bool = setting(
        "STEELFRAME_CHAT_MODEL_SEARCH_WORDS",
        _bool,
        "ask the model for search words each turn (one short extra model call)",
        False,
    )
    # Where each value came from (default, a file, the environment): for `config --list`.
    sources: dict[str, str] = field(default_factory=dict, compare=False, repr=False)

    @classmethod
    def from_env(
        cls,
        environ: Mapping[str, str] | None = None,
        *,
        toml_path: Path | None = None,
        defaults: Mapping[str, Any] | None = None,
        dotenv: Mapping[str, str] | None = None,
    ) -> Settings:
        """Build settings: `defaults` < steelframe.toml < `.env` < environment.

        `defaults` lets an entry point such as `steelframe dev` supply its embedded defaults
        while anything the environment sets still wins. `dotenv` holds the variables of a
        `.env` file, which never override the real environment (as in Probot).
        """
        environ = os.environ if environ is None else environ
        values: dict[str, Any] = dict(defaults or {})
        sources = dict.fromkeys(values, "dev default")
        if toml_path is None and "STEELFRAME_CONFIG" in environ:
            toml_path = Path(environ["STEELFRAME_CONFIG"])
        if toml_path is not None:
            from_toml = _read_toml(toml_path)
            values.update(from_toml)
            sources.update(dict.fromkeys(from_toml, str(toml_path)))
        for origin, variables in ((".env", dotenv or {}), ("environment", environ)):
            # An empty variable (`WEBHOOK_SECRET= steelframe serve`) unsets the setting,
            # whatever a lower source said: back to its default, as in a shell.
            emptied = {
                _BY_ENV[n].attr for n, raw in variables.items() if raw == "" and n in _BY_ENV
            }
            for attr in emptied:
                values.pop(attr, None)
                sources[attr] = f"{origin} (empty: unset)"
            parsed = _read_variables(
                {n: raw for n, raw in variables.items() if not (raw == "" and n in _BY_ENV)}
            )
            values.update(parsed)
            sources.update(dict.fromkeys(parsed, origin))
        if values.get("ghe_host") and "github_api_url" not in values:
            protocol = values.get("ghe_protocol", "https")
            values["github_api_url"] = f"{protocol}://{values['ghe_host']}/api/v3"
            sources["github_api_url"] = f"GHE_HOST ({sources['ghe_host']})"
        _resolve_paths(values)
        settings = cls(**values, sources=sources)
        settings.validate()
        return settings

    def validate(self) -> None:
        if self.private_key is not None and self.private_key_path is not None:
            raise ConfigError("PRIVATE_KEY and PRIVATE_KEY_PATH: set one, not both")
        if self.private_key is not None:
            _pem_from_variable(self.private_key.reveal())  # refuses a malformed key at start
        if self.runtime == "command" and not self.chat_command:
            raise ConfigError("STEELFRAME_CHAT_COMMAND: required when STEELFRAME_RUNTIME=command")
        if self.coding_agent == "command" and not self.coding_command:
            raise ConfigError(
                "STEELFRAME_CODING_COMMAND: required when STEELFRAME_CODING_AGENT=command"
            )
        if self.log_level.upper() not in {"DEBUG", "INFO", "WARNING", "ERROR"}:
            raise ConfigError(
                f"STEELFRAME_LOG_LEVEL (or LOG_LEVEL): {self.log_level!r} is not a log level"
            )
        for name in self.agents_json:
            _agent_from_json(name, self.agents_json[name], self)

    @property
    def agents(self) -> dict[str, AgentConfig]:
        """`default` from STEELFRAME_REPO/CHECKOUT/RUNTIME, plus STEELFRAME_AGENTS."""
        agents = {"default": AgentConfig("default", self.repo, self.checkout, self.runtime)}
        for name, raw in self.agents_json.items():
            agents[name] = _agent_from_json(name, raw, self)
        return agents

    @property
    def github_configured(self) -> bool:
        return self.app_id is not None and (
            self.private_key is not None or self.private_key_path is not None
        )

    def private_key_pem(self) -> Secret | None:
        """The App's private key, read from PRIVATE_KEY or the file at PRIVATE_KEY_PATH."""
        if self.private_key is not None:
            return Secret(_pem_from_variable(self.private_key.reveal()))
        if self.private_key_path is not None:
            try:
                return Secret(self.private_key_path.read_text())
            except OSError as exc:
                raise ConfigError(
                    f"PRIVATE_KEY_PATH: cannot read the key file ({exc.strerror})"
                ) from exc
        return None

    def described(self) -> list[tuple[str, str, str, str, str]]:
        """(variable, value, source, default, help) for every setting, secrets masked."""
        shown = self.redacted()
        return [
            (
                spec.env,
                shown[spec.env],
                self.sources.get(spec.attr, "default"),
                _shown_default(spec),
                spec.help,
            )
            for spec in FIELDS
        ]

    def redacted(self) -> dict[str, str]:
        """Every setting as text, secrets masked: for `steelframe config` and start-up logs."""
        shown = {spec.env: _shown(getattr(self, spec.attr)) for spec in FIELDS}
        for env in ("STEELFRAME_DATABASE_URL", "STEELFRAME_REDIS_URL"):
            shown[env] = _mask_url_password(shown[env])
        return shown


# Variables of the TUI client (`steelframe-tui`), which share a shell with the service's.
CLIENT_VARIABLES = frozenset({"STEELFRAME_TOKEN", "STEELFRAME_URL"})


def _read_variables(variables: Mapping[str, str]) -> dict[str, Any]:
    """Parse the known variables of one source; an unknown `STEELFRAME_*` one is an error."""
    values: dict[str, Any] = {}
    for name, raw in variables.items():
        if name == "STEELFRAME_CONFIG" or name.startswith("STEELFRAME_TEST_"):
            continue
        if name in CLIENT_VARIABLES:
            continue
        spec = _BY_ENV.get(name)
        if spec is None:
            if name.startswith("STEELFRAME_"):
                raise ConfigError(f"{name}: unknown setting (see docs/configuration.md)")
            continue
        if name != spec.env and spec.env in variables:
            continue  # the main name wins over an alias
        values[spec.attr] = _parse(spec, raw)
    return values


def _pem_from_variable(value: str) -> str:
    """PRIVATE_KEY as a PEM (env files often carry it on one line with literal \\n) or as
    base64 of the PEM, as Probot accepts both."""
    if "-----BEGIN" in value:
        return value.replace("\\n", "\n")
    try:
        decoded = base64.b64decode(value.strip(), validate=True).decode()
    except (ValueError, UnicodeDecodeError):
        decoded = ""
    if "-----BEGIN" not in decoded:
        raise ConfigError("PRIVATE_KEY: neither a PEM nor the base64 of one")
    return decoded


def _shown(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, tuple):
        return ",".join(map(str, value))
    if isinstance(value, list | dict):
        return json.dumps(value)
    return str(value)


def _spec(f: Any) -> SettingSpec:
    default = f.default_factory() if f.default is MISSING else f.default
    return SettingSpec(
        env=f.metadata["env"],
        attr=f.name,
        parse=f.metadata["parse"],
        help=f.metadata["help"],
        default=default,
        secret=f.metadata["parse"] is _secret,
        aliases=f.metadata["aliases"],
    )


# The one list of every variable Steelframe reads, derived from the `Settings` declaration.
FIELDS: tuple[SettingSpec, ...] = tuple(_spec(f) for f in fields(Settings) if f.metadata)
_BY_ENV = {name: f for f in FIELDS for name in (f.env, *f.aliases)}
_BY_ATTR = {f.attr: f for f in FIELDS}


def _resolve_paths(values: dict[str, Any]) -> None:
    """Paths absolute once, at start: worktrees, git and coding runs change directory.
    The default database lives in the data directory, the same for every command."""
    data_dir = Path(values.get("data_dir", DEFAULT_DATA_DIR)).expanduser().resolve()
    values["data_dir"] = data_dir
    values["checkout"] = Path(values.get("checkout", Path("."))).expanduser().resolve()
    values.setdefault("database_url", f"sqlite:///{data_dir / DEFAULT_DATABASE_FILE}")


def _parse(spec: SettingSpec, raw: str) -> Any:
    try:
        return spec.parse(raw)
    except (ValueError, TypeError) as exc:
        if spec.parse is _secret:
            shown = "(secret)"
        elif spec.parse is _database_url:
            shown = repr(_mask_url_password(raw))
        else:
            shown = repr(raw)
        raise ConfigError(f"{spec.env}: {shown} is not valid: {exc}") from exc


def _read_toml(path: Path) -> dict[str, Any]:
    try:
        data = tomllib.loads(path.read_text())
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read ({exc.strerror})") from exc
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{path}: not valid TOML ({exc})") from exc
    values: dict[str, Any] = {}
    for key, raw in data.items():
        if key == "agents":
            key = "agents_json"
        spec = _BY_ENV.get(key.upper()) or _BY_ATTR.get(key)
        if spec is None:
            raise ConfigError(f"{path}: {key}: unknown setting (see docs/configuration.md)")
        if spec.attr == "agents_json":
            if not isinstance(raw, dict):
                raise ConfigError(f"{path}: agents must be a table")
            values["agents_json"] = raw
            continue
        text = json.dumps(raw) if isinstance(raw, list | dict) else str(raw)
        if isinstance(raw, list) and spec.parse in (_labels, _names):
            text = ",".join(map(str, raw))
        elif isinstance(raw, list) and spec.parse is _paths:
            text = os.pathsep.join(map(str, raw))
        values[spec.attr] = _parse(spec, text)
    return values


def _agent_from_json(name: str, raw: Any, settings: Settings) -> AgentConfig:
    where = f"STEELFRAME_AGENTS: agent {name!r}"
    if not isinstance(raw, dict):
        raise ConfigError(f"{where} must be an object with repo, checkout, runtime")
    unknown = set(raw) - {"repo", "checkout", "runtime"}
    if unknown:
        raise ConfigError(f"{where}: unknown keys {sorted(unknown)}")
    try:
        repo = _repo(str(raw.get("repo", settings.repo)))
        runtime = _runtime(str(raw.get("runtime", settings.runtime)))
    except ValueError as exc:
        raise ConfigError(f"{where}: {exc}") from exc
    checkout = Path(str(raw.get("checkout", settings.checkout)))
    return AgentConfig(name, repo, checkout, runtime)


def _shown_default(spec: SettingSpec) -> str:
    if spec.default is None or spec.default in ({}, []):
        return "(unset)"
    if isinstance(spec.default, tuple):
        return ",".join(spec.default)
    return str(spec.default)
