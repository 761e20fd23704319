"""Settings: read once per entry point from the environment (plus an optional steelframe.toml).

Every known variable is declared in `FIELDS`; an unknown `STEELFRAME_*` variable, an unknown
key in the TOML file or a value that does not parse stops start-up with a `ConfigError` that
names the variable. Secrets are wrapped in `Secret` so they never show in a repr or a log.
"""

from __future__ import annotations

import json
import os
import tomllib
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

DEFAULT_DATABASE_URL = "sqlite:///var/steelframe.db"
DEFAULT_PICKUP_LABELS = ("steelframe:work-on-this",)
DEFAULT_CHAT_MAX_BODY = 64 * 1024
DEFAULT_WEBHOOK_MAX_BODY = 25 * 1024 * 1024  # GitHub caps webhook payloads at 25 MB.
RUNTIMES = ("offline", "openai", "anthropic", "command")
# Coding agents the worker knows how to drive (docs/runtimes.md, "Coding agents").
CODING_AGENTS = ("demo", "command", "claude", "codex", "aider")


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


def _int(value: str) -> int:
    return int(value)


def _positive_int(value: str) -> int:
    number = int(value)
    if number <= 0:
        raise ValueError("must be a positive integer")
    return number


def _float(value: str) -> float:
    return float(value)


def _positive_float(value: str) -> float:
    number = float(value)
    if not 0 < number < float("inf"):  # also refuses nan
        raise ValueError("must be a positive, finite number")
    return number


def _mask_url_password(url: str) -> str:
    parsed = urlsplit(url)
    if parsed.password is None:
        return url
    netloc = parsed.netloc.replace(f":{parsed.password}@", ":***@", 1)
    return urlunsplit(parsed._replace(netloc=netloc))


def _non_negative_int(value: str) -> int:
    number = int(value)
    if number < 0:
        raise ValueError("must be zero or a positive integer")
    return number


def _bool(value: str) -> bool:
    lowered = value.strip().lower()
    if lowered in {"1", "true", "yes", "on"}:
        return True
    if lowered in {"0", "false", "no", "off"}:
        return False
    raise ValueError("must be true or false")


def _coding_agent(value: str) -> str:
    if value not in CODING_AGENTS:
        raise ValueError(f"must be one of {', '.join(CODING_AGENTS)}")
    return value


def _runtime(value: str) -> str:
    if value not in RUNTIMES:
        raise ValueError(f"must be one of {', '.join(RUNTIMES)}")
    return value


def _labels(value: str) -> tuple[str, ...]:
    labels = tuple(label.strip() for label in value.split(",") if label.strip())
    if not labels:
        raise ValueError("must name at least one label")
    return labels


def _repo(value: str) -> str:
    owner, _, name = value.partition("/")
    if not owner or not name or "/" in name:
        raise ValueError("must look like owner/name")
    return value


def _json_list(value: str) -> list[Any]:
    parsed = json.loads(value)
    if not isinstance(parsed, list):
        raise ValueError("must be a JSON list")
    return parsed


def _json_object(value: str) -> dict[str, Any]:
    parsed = json.loads(value)
    if not isinstance(parsed, dict):
        raise ValueError("must be a JSON object")
    return parsed


def _secret(value: str) -> Secret:
    return Secret(value)


@dataclass(frozen=True)
class _Field:
    env: str
    attr: str
    parse: Callable[[str], Any]
    help: str


# The one list of every variable Steelframe reads. docs/configuration.md mirrors it.
FIELDS: tuple[_Field, ...] = (
    _Field("STEELFRAME_DATABASE_URL", "database_url", _str, "SQLAlchemy URL"),
    _Field("STEELFRAME_REDIS_URL", "redis_url", _str, "Redis URL for RQ and stop signals"),
    _Field("STEELFRAME_RUNTIME", "runtime", _runtime, "offline|openai|anthropic|command"),
    _Field("STEELFRAME_MODEL", "model", _str, "model name for openai/anthropic"),
    _Field("STEELFRAME_FALLBACKS", "fallbacks", _json_list, "ordered fallback routes (JSON)"),
    _Field("STEELFRAME_MODEL_PRICES", "model_prices", _json_object, "USD per 1M tokens"),
    _Field("STEELFRAME_CONTEXT_TOKENS", "context_tokens", _positive_int, "context window"),
    _Field("STEELFRAME_CHAT_COMMAND", "chat_command", _str, "command runtime: the CLI to run"),
    _Field("STEELFRAME_MODEL_CONTEXT", "model_context", _json_object, "context tokens by model"),
    _Field("STEELFRAME_MODEL_TIMEOUT_SECONDS", "model_timeout_seconds", _float, "idle model wait"),
    _Field("STEELFRAME_TOOL_ROUNDS", "tool_rounds", _non_negative_int, "repo tool rounds; 0=off"),
    _Field(
        "STEELFRAME_THINKING_TOKENS", "thinking_tokens", _non_negative_int, "anthropic thinking"
    ),
    _Field("STEELFRAME_CODING_COMMAND", "coding_command", _str, "worker's coding runtime"),
    _Field("STEELFRAME_CODING_AGENT", "coding_agent", _coding_agent, "|".join(CODING_AGENTS)),
    _Field("STEELFRAME_CODING_MODEL", "coding_model", _str, "model the coding agent uses"),
    _Field("STEELFRAME_CODING_MAX_TURNS", "coding_max_turns", _positive_int, "claude turns"),
    _Field("STEELFRAME_REPO", "repo", _repo, "default agent repository owner/name"),
    _Field("STEELFRAME_CHECKOUT", "checkout", Path, "default agent read-only checkout"),
    _Field("STEELFRAME_AGENTS", "agents_json", _json_object, "extra agents (JSON)"),
    _Field("STEELFRAME_PICKUP_LABELS", "pickup_labels", _labels, "comma-separated"),
    _Field("STEELFRAME_DATA_DIR", "data_dir", Path, "where indexes and worktrees live"),
    _Field("STEELFRAME_CHAT_MAX_BODY", "chat_max_body", _positive_int, "bytes"),
    _Field("STEELFRAME_HEARTBEAT_SECONDS", "heartbeat_seconds", _positive_float, "SSE heartbeat"),
    _Field("STEELFRAME_TURN_TIMEOUT_SECONDS", "turn_timeout_seconds", _positive_float, "per turn"),
    _Field("STEELFRAME_TASK_TIME_LIMIT", "task_time_limit", _positive_int, "seconds"),
    _Field("STEELFRAME_TASK_MAX_ATTEMPTS", "task_max_attempts", _positive_int, "attempts"),
    _Field("STEELFRAME_TASK_MAX_TOKENS", "task_max_tokens", _positive_int, "tokens a task"),
    _Field("STEELFRAME_TASK_MAX_COST_USD", "task_max_cost_usd", _float, "USD a task"),
    _Field("STEELFRAME_TASK_LEASE_SECONDS", "task_lease_seconds", _float, "run lease expiry"),
    _Field(
        "STEELFRAME_TASK_RETRY_BACKOFF_SECONDS",
        "task_retry_backoff_seconds",
        _float,
        "first retry delay; doubles per attempt",
    ),
    _Field("STEELFRAME_LOG_LEVEL", "log_level", _str, "DEBUG|INFO|WARNING|ERROR"),
    _Field("OPENAI_BASE_URL", "openai_base_url", _str, "OpenAI-compatible base URL"),
    _Field("OPENAI_API_KEY", "openai_api_key", _secret, "secret"),
    _Field("ANTHROPIC_BASE_URL", "anthropic_base_url", _str, "Anthropic base URL"),
    _Field("ANTHROPIC_API_KEY", "anthropic_api_key", _secret, "secret"),
    _Field("APP_ID", "app_id", _positive_int, "GitHub App id"),
    _Field("PRIVATE_KEY", "private_key", _secret, "PEM of the App's private key"),
    _Field("PRIVATE_KEY_PATH", "private_key_path", Path, "path to that PEM"),
    _Field("WEBHOOK_SECRET", "webhook_secret", _secret, "webhook HMAC secret"),
    _Field("GITHUB_API_URL", "github_api_url", _str, "GitHub REST base URL"),
    _Field(
        "STEELFRAME_GITHUB_WRITE_INTERVAL",
        "github_write_interval",
        _float,
        "seconds between writes per installation",
    ),
)
_BY_ENV = {f.env: f for f in FIELDS}
_BY_ATTR = {f.attr: f for f in FIELDS}


@dataclass(frozen=True)
class Settings:
    database_url: str = DEFAULT_DATABASE_URL
    redis_url: str | None = None
    runtime: str = "offline"
    model: str | None = None
    fallbacks: list[Any] = field(default_factory=list)
    model_prices: dict[str, Any] = field(default_factory=dict)
    context_tokens: int = 32_000
    chat_command: str | None = None
    model_context: dict[str, Any] = field(default_factory=dict)
    model_timeout_seconds: float = 120.0
    tool_rounds: int = 4
    thinking_tokens: int = 0
    coding_command: str | None = None
    # None: `command` when STEELFRAME_CODING_COMMAND is set, else no coding runtime.
    coding_agent: str | None = None
    coding_model: str | None = None
    coding_max_turns: int = 50
    repo: str = "steelframe-dev/sandbox"
    checkout: Path = Path(".")
    agents_json: dict[str, Any] = field(default_factory=dict)
    pickup_labels: tuple[str, ...] = DEFAULT_PICKUP_LABELS
    data_dir: Path = Path("var")
    chat_max_body: int = DEFAULT_CHAT_MAX_BODY
    heartbeat_seconds: float = 15.0
    turn_timeout_seconds: float = 300.0
    task_time_limit: int = 1800
    task_max_attempts: int = 3
    task_max_tokens: int | None = None
    task_max_cost_usd: float | None = None
    # A run renews its lease every third of this; a lease not renewed for this long is dead.
    task_lease_seconds: float = 60.0
    task_retry_backoff_seconds: float = 30.0
    log_level: str = "INFO"
    openai_base_url: str = "https://api.openai.com/v1"
    openai_api_key: Secret | None = None
    anthropic_base_url: str = "https://api.anthropic.com"
    anthropic_api_key: Secret | None = None
    app_id: int | None = None
    private_key: Secret | None = None
    private_key_path: Path | None = None
    webhook_secret: Secret | None = None
    github_api_url: str = "https://api.github.com"
    # GitHub asks for at least 1 s between content-creating requests per installation.
    github_write_interval: float = 1.0

    @classmethod
    def from_env(
        cls,
        environ: Mapping[str, str] | None = None,
        *,
        toml_path: Path | None = None,
        defaults: Mapping[str, Any] | None = None,
    ) -> Settings:
        """Build settings: `defaults` < steelframe.toml < environment.

        `defaults` lets an entry point such as `steelframe dev` supply its embedded defaults
        while anything the environment sets still wins.
        """
        environ = os.environ if environ is None else environ
        values: dict[str, Any] = dict(defaults or {})
        if toml_path is None and "STEELFRAME_CONFIG" in environ:
            toml_path = Path(environ["STEELFRAME_CONFIG"])
        if toml_path is not None:
            values.update(_read_toml(toml_path))
        for name, raw in environ.items():
            if name == "STEELFRAME_CONFIG" or name.startswith("STEELFRAME_TEST_"):
                continue
            spec = _BY_ENV.get(name)
            if spec is None:
                if name.startswith("STEELFRAME_"):
                    raise ConfigError(f"{name}: unknown setting (see docs/configuration.md)")
                continue
            values[spec.attr] = _parse(spec, raw)
        settings = cls(**values)
        settings.validate()
        return settings

    def validate(self) -> None:
        if self.private_key is not None and self.private_key_path is not None:
            raise ConfigError("PRIVATE_KEY and PRIVATE_KEY_PATH: set one, not both")
        if self.runtime == "command" and not self.chat_command:
            raise ConfigError("STEELFRAME_CHAT_COMMAND: required when STEELFRAME_RUNTIME=command")
        if self.coding_agent == "command" and not self.coding_command:
            raise ConfigError(
                "STEELFRAME_CODING_COMMAND: required when STEELFRAME_CODING_AGENT=command"
            )
        if self.log_level.upper() not in {"DEBUG", "INFO", "WARNING", "ERROR"}:
            raise ConfigError(f"STEELFRAME_LOG_LEVEL: {self.log_level!r} is not a log level")
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
            # Env files often carry the PEM on one line with literal \n.
            return Secret(self.private_key.reveal().replace("\\n", "\n"))
        if self.private_key_path is not None:
            try:
                return Secret(self.private_key_path.read_text())
            except OSError as exc:
                raise ConfigError(
                    f"PRIVATE_KEY_PATH: cannot read the key file ({exc.strerror})"
                ) from exc
        return None

    def redacted(self) -> dict[str, str]:
        """Every setting as text, secrets masked: for `steelframe config` and start-up logs."""
        shown = {spec.env: str(getattr(self, spec.attr)) for spec in FIELDS}
        for env in ("STEELFRAME_DATABASE_URL", "STEELFRAME_REDIS_URL"):
            shown[env] = _mask_url_password(shown[env])
        return shown


def _parse(spec: _Field, raw: str) -> Any:
    try:
        return spec.parse(raw)
    except (ValueError, TypeError) as exc:
        shown = "(secret)" if spec.parse is _secret else repr(raw)
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
        if isinstance(raw, list) and spec.parse is _labels:
            text = ",".join(map(str, raw))
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


def settings_fields() -> list[tuple[str, str, str]]:
    """(variable, default, help) for docs and `steelframe config --help`."""
    defaults = {f.name: f.default for f in fields(Settings)}
    return [(f.env, str(defaults.get(f.attr, "")), f.help) for f in FIELDS]
