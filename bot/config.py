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
from collections.abc import Mapping
from dataclasses import MISSING, dataclass, field, fields
from pathlib import Path
from typing import Any

from bot.config_coding import CodingSettings
from bot.config_models import ModelSettings
from bot.config_values import (
    DEFAULT_TASK_QUEUE,
    ConfigError,
    Secret,
    SettingSpec,
    mask_url_password,
    parse_bool,
    parse_database_url,
    parse_float,
    parse_host,
    parse_json_object,
    parse_labels,
    parse_log_format,
    parse_names,
    parse_paths,
    parse_port,
    parse_positive_float,
    parse_positive_int,
    parse_protocol,
    parse_public_url,
    parse_queue_name,
    parse_redis_url,
    parse_repo,
    parse_runtime,
    parse_secret,
    parse_str,
    setting,
)
from bot.contracts.chat import MAX_MESSAGE_CHARS

DEFAULT_DATA_DIR = Path("var")
# Every command in a checkout (serve, dev, worker, webhooks, memory...) uses the same file
# under the data directory unless STEELFRAME_DATABASE_URL says otherwise.
DEFAULT_DATABASE_FILE = "steelframe.db"
DEFAULT_DATABASE_URL = f"sqlite:///{DEFAULT_DATA_DIR / DEFAULT_DATABASE_FILE}"
DEFAULT_PICKUP_LABELS = ("steelframe:work-on-this",)
# A message at its character limit fits however its client encodes it: UTF-8 (up to 4 bytes
# a character) or JSON's \uXXXX escapes (6; only an escaped emoji, 12, can go past), with
# room for the other fields. At 64 KiB a CJK message was refused at a third of its limit.
DEFAULT_CHAT_MAX_BODY = 6 * MAX_MESSAGE_CHARS + 4 * 1024
DEFAULT_WEBHOOK_MAX_BODY = 25 * 1024 * 1024  # GitHub caps webhook payloads at 25 MB.


@dataclass(frozen=True)
class AgentConfig:
    """A named agent: a repository, its read-only checkout and the runtime that answers."""

    name: str
    repo: str
    checkout: Path
    runtime: str


@dataclass(frozen=True)
class Settings(ModelSettings, CodingSettings):
    """Every setting Steelframe reads; docs/configuration.md mirrors it (a test checks)."""

    # One `setting(...)` per field: the table's repeated shape is the declaration, written
    # once per setting (duplicates lists it; nothing here is copied logic).
    database_url: str = setting(
        "STEELFRAME_DATABASE_URL",
        parse_database_url,
        "SQLAlchemy URL (postgres:// accepted); default: a file in the data directory",
        DEFAULT_DATABASE_URL,
    )
    redis_url: str | None = setting(
        "STEELFRAME_REDIS_URL", parse_redis_url, "Redis URL for RQ and stop signals"
    )
    repo: str = setting(
        "STEELFRAME_REPO",
        parse_repo,
        "default agent repository owner/name",
        "steelframe-dev/sandbox",
    )
    checkout: Path = setting(
        "STEELFRAME_CHECKOUT", Path, "default agent read-only checkout", Path(".")
    )
    agents_json: dict[str, Any] = setting(
        "STEELFRAME_AGENTS", parse_json_object, "extra agents (JSON)", {}
    )
    pickup_labels: tuple[str, ...] = setting(
        "STEELFRAME_PICKUP_LABELS", parse_labels, "comma-separated", DEFAULT_PICKUP_LABELS
    )
    # Deployments sharing one Redis database each need their own (a worker takes whatever
    # job its queue holds).
    task_queue: str = setting(
        "STEELFRAME_TASK_QUEUE",
        parse_queue_name,
        "the task lifecycle's RQ queue",
        DEFAULT_TASK_QUEUE,
    )
    data_dir: Path = setting(
        "STEELFRAME_DATA_DIR", Path, "where indexes and worktrees live", DEFAULT_DATA_DIR
    )
    chat_max_body: int = setting(
        "STEELFRAME_CHAT_MAX_BODY", parse_positive_int, "bytes", DEFAULT_CHAT_MAX_BODY
    )
    heartbeat_seconds: float = setting(
        "STEELFRAME_HEARTBEAT_SECONDS", parse_positive_float, "SSE heartbeat", 15.0
    )
    turn_timeout_seconds: float = setting(
        "STEELFRAME_TURN_TIMEOUT_SECONDS", parse_positive_float, "per turn", 300.0
    )
    # A stopping service lets the chat turns operators are watching finish for this long,
    # then ends them (bot.chat.inflight.TurnRegistry.shut_down): below the supervisor's
    # stop timeout (docs/configuration.md), so their end is written before a SIGKILL.
    shutdown_grace_seconds: float = setting(
        "STEELFRAME_SHUTDOWN_GRACE_SECONDS",
        parse_positive_float,
        "watched chat turns may finish within this at shutdown",
        15.0,
    )
    # A chat turn's slot (bot/chat/coordination.py) lapses this long after its instance
    # last renewed it: a killed instance's turn frees its operator, and ends for readers
    # re-attaching elsewhere, within about this (bot/chat/frame_reader.py, OWNER_GONE_GRACE).
    chat_turn_slot_ttl_seconds: float = setting(
        "STEELFRAME_CHAT_TURN_SLOT_TTL_SECONDS",
        parse_positive_float,
        "a killed instance's chat turn is known gone within this",
        30.0,  # bot.chat.coordination.SLOT_TTL_SECONDS
    )
    summary_idle_seconds: float = setting(
        "STEELFRAME_SUMMARY_IDLE_SECONDS",
        parse_positive_float,
        "idle time before a session is summarised",
        1800.0,
    )
    # Idempotency records of Decisions and filings (bot/idempotency.py, `expire`, swept by
    # the reconciler's periodic pass) untouched this long are deleted. 30 days: ten times
    # GitHub's redelivery window (a delivery can be redelivered for 3 days) and far past any
    # client's Idempotency-Key retry (minutes to a day; Stripe keeps keys 24 hours), so a
    # retry held up by a long outage still replays, while the table holds about a month.
    side_effect_retention_days: int = setting(
        "STEELFRAME_SIDE_EFFECT_RETENTION_DAYS",
        parse_positive_int,
        "days a Decision's or filing's idempotency record is kept",
        30,
    )
    checkout_refresh_seconds: float = setting(
        "STEELFRAME_CHECKOUT_REFRESH_SECONDS",
        parse_positive_float,
        "Chat's managed clone: refresh at most this often",
        60.0,
    )
    log_level: str = setting(
        "STEELFRAME_LOG_LEVEL",
        parse_str,
        "DEBUG|INFO|WARNING|ERROR",
        "INFO",
        aliases=("LOG_LEVEL",),
    )
    log_format: str = setting(
        "STEELFRAME_LOG_FORMAT",
        parse_log_format,
        "text|json: one JSON object a line, with request, delivery, task and turn ids",
        "text",
        aliases=("LOG_FORMAT",),
    )
    access_log: bool = setting(
        "STEELFRAME_ACCESS_LOG", parse_bool, "aiohttp's access log, one line a request", False
    )
    metrics_token: Secret | None = setting(
        "STEELFRAME_METRICS_TOKEN",
        parse_secret,
        "bearer token for /metrics, always required; unset: nobody may scrape",
    )
    host: str = setting("HOST", parse_str, "address `serve` and `dev` listen on", "127.0.0.1")
    port: int = setting("PORT", parse_port, "port `serve` and `dev` listen on (0: any free)", 8080)
    # Behind a TLS-terminating proxy the service sees http and the proxy's host; browsers see
    # this origin. Forwarded headers are not trusted: anyone can send them.
    public_url: str | None = setting(
        "STEELFRAME_PUBLIC_URL",
        parse_public_url,
        "origin browsers reach the service at, behind a proxy",
    )
    # Hardening (issue 35): throttled authentication failures.
    auth_free_failures: int = setting(
        "STEELFRAME_AUTH_FREE_FAILURES",
        parse_positive_int,
        "failed authentications per client address or token prefix before backoff",
        10,
    )
    auth_backoff_ceiling_seconds: float = setting(
        "STEELFRAME_AUTH_BACKOFF_CEILING_SECONDS",
        parse_positive_float,
        "longest wait (Retry-After) after failed authentications",
        60.0,
    )
    app_id: int | None = setting("APP_ID", parse_positive_int, "GitHub App id")
    private_key: Secret | None = setting(
        "PRIVATE_KEY", parse_secret, "PEM of the App's private key"
    )
    private_key_path: Path | None = setting("PRIVATE_KEY_PATH", Path, "path to that PEM")
    webhook_secret: Secret | None = setting("WEBHOOK_SECRET", parse_secret, "webhook HMAC secret")
    github_api_url: str = setting(
        "GITHUB_API_URL", parse_str, "GitHub REST base URL", "https://api.github.com"
    )
    ghe_host: str | None = setting(
        "GHE_HOST",
        parse_host,
        "GitHub Enterprise host; sets the API URL unless GITHUB_API_URL does",
    )
    ghe_protocol: str = setting("GHE_PROTOCOL", parse_protocol, "http|https for GHE_HOST", "https")
    webhook_proxy_url: str | None = setting(
        "WEBHOOK_PROXY_URL", parse_str, "a smee.io-style relay to receive webhooks through"
    )
    # GitHub asks for at least 1 s between content-creating requests per installation.
    github_write_interval: float = setting(
        "STEELFRAME_GITHUB_WRITE_INTERVAL",
        parse_float,
        "seconds between writes per installation",
        1.0,
    )
    # Issue 36 (what a coding run can reach): Redis auth, the push limit.
    redis_allow_unauthenticated: bool = setting(
        "STEELFRAME_REDIS_ALLOW_UNAUTHENTICATED",
        parse_bool,
        "let serve and worker use a Redis off loopback without a password",
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
                {n: raw for n, raw in variables.items() if not (raw == "" and n in _BY_ENV)},
                origin,
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
        self.embeddings()  # hybrid ranking on but without a model or a usable URL

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
            shown[env] = mask_url_password(shown[env])
        return shown


# Variables of the TUI client (`steelframe-tui`), which share a shell with the service's.
CLIENT_VARIABLES = frozenset({"STEELFRAME_TOKEN", "STEELFRAME_URL"})


def _read_variables(variables: Mapping[str, str], origin: str) -> dict[str, Any]:
    """Parse the known variables of one source; an unknown `STEELFRAME_*` one is an error.
    An error names `.env` when the variable came from there: the shell has no such variable
    to look at."""
    where = ".env: " if origin == ".env" else ""
    values: dict[str, Any] = {}
    for name, raw in variables.items():
        if name == "STEELFRAME_CONFIG" or name.startswith("STEELFRAME_TEST_"):
            continue
        if name in CLIENT_VARIABLES:
            continue
        spec = _BY_ENV.get(name)
        if spec is None:
            if name.startswith("STEELFRAME_"):
                raise ConfigError(f"{where}{name}: unknown setting (see docs/configuration.md)")
            continue
        if name != spec.env and spec.env in variables:
            continue  # the main name wins over an alias
        values[spec.attr] = _parse(spec, raw, f"{where}{name}")
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
        secret=f.metadata["parse"] is parse_secret,
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


def _parse(spec: SettingSpec, raw: str, where: str) -> Any:
    """`raw` as `spec`'s value, or a ConfigError naming `where` it was set and the value."""
    try:
        return spec.parse(raw)
    except (ValueError, TypeError) as exc:
        if spec.parse is parse_secret:
            shown = "(secret)"
        elif spec.parse in (parse_database_url, parse_redis_url):
            shown = repr(mask_url_password(raw))
        else:
            shown = repr(raw)
        raise ConfigError(f"{where}: {shown} is not valid: {exc}") from exc


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
        if isinstance(raw, list) and spec.parse in (parse_labels, parse_names):
            text = ",".join(map(str, raw))
        elif isinstance(raw, list) and spec.parse is parse_paths:
            text = os.pathsep.join(map(str, raw))
        # The key as the file spells it, and the variable the docs list it under.
        named = key if key == spec.env else f"{key} ({spec.env})"
        values[spec.attr] = _parse(spec, text, f"{path}: {named}")
    return values


def _agent_from_json(name: str, raw: Any, settings: Settings) -> AgentConfig:
    where = f"STEELFRAME_AGENTS: agent {name!r}"
    if not isinstance(raw, dict):
        raise ConfigError(f"{where} must be an object with repo, checkout, runtime")
    unknown = set(raw) - {"repo", "checkout", "runtime"}
    if unknown:
        raise ConfigError(f"{where}: unknown keys {sorted(unknown)}")
    try:
        repo = parse_repo(str(raw.get("repo", settings.repo)))
        runtime = parse_runtime(str(raw.get("runtime", settings.runtime)))
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
