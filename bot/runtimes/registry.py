"""Model runtimes by name, with their fallback routes, built from settings.

`check_runtime_settings` runs the same validation at start-up, so a bad STEELFRAME_FALLBACKS,
STEELFRAME_MODEL_PRICES or STEELFRAME_MODEL_CONTEXT stops the service with a message that
names the variable instead of failing a turn later. docs/runtimes.md documents the shapes.
"""

from __future__ import annotations

from typing import Any

import aiohttp

from bot.config import AgentConfig, Settings
from bot.config_values import ConfigError, Secret
from bot.runtimes.anthropic import AnthropicRuntime
from bot.runtimes.base import Runtime
from bot.runtimes.command import CommandRuntime
from bot.runtimes.fallback import FallbackRuntime
from bot.runtimes.offline import OfflineRuntime
from bot.runtimes.openai import OpenAIRuntime
from bot.runtimes.pricing import parse_prices
from bot.runtimes.transport import Endpoint

MODEL_RUNTIMES = ("openai", "anthropic")
_FALLBACK_KEYS = frozenset({"runtime", "model", "base_url"})


def build_runtime(
    name: str,
    settings: Settings,
    agent: AgentConfig,
    *,
    http: aiohttp.ClientSession | None = None,
) -> Runtime:
    """The runtime `name` with its fallbacks. `http`, when given, is one client session the
    service keeps for its lifetime, so turns reuse connections (no TLS handshake per turn)."""
    if name == "offline":
        return OfflineRuntime()
    primary = _primary(name, settings, http)
    fallbacks = [
        _fallback(entry, position, name, settings, http)
        for position, entry in enumerate(settings.fallbacks)
    ]
    return FallbackRuntime([primary, *fallbacks]) if fallbacks else primary


def check_runtime_settings(settings: Settings) -> None:
    """Raise ConfigError for any runtime setting `build_runtime` would refuse."""
    parse_prices(settings.model_prices)
    for model in settings.model_context:
        context_window(settings, model)
    if 0 < settings.thinking_tokens < 1024:
        raise ConfigError(
            "STEELFRAME_THINKING_TOKENS: Anthropic needs at least 1024 (or 0 for off)"
        )
    if settings.model_timeout_seconds <= 0:
        raise ConfigError("STEELFRAME_MODEL_TIMEOUT_SECONDS: must be a positive number of seconds")
    runtimes = {settings.runtime, *(agent.runtime for agent in settings.agents.values())}
    for name in runtimes - {"offline"}:
        build_runtime(name, settings, settings.agents["default"])


def context_window(settings: Settings, model: str) -> int:
    value = settings.model_context.get(model, settings.context_tokens)
    if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
        raise ConfigError(f"STEELFRAME_MODEL_CONTEXT: model {model!r} needs a positive token count")
    return value


def _primary(name: str, settings: Settings, http: aiohttp.ClientSession | None) -> Runtime:
    if name == "command":
        if not settings.chat_command:
            raise ConfigError("STEELFRAME_CHAT_COMMAND: required when STEELFRAME_RUNTIME=command")
        window = (
            context_window(settings, settings.model) if settings.model else settings.context_tokens
        )
        try:
            return CommandRuntime(
                command=settings.chat_command,
                model=settings.model,
                context_tokens=window,
                read_timeout=settings.model_timeout_seconds,
            )
        except ValueError as exc:
            raise ConfigError(f"STEELFRAME_CHAT_COMMAND: {exc}") from exc
    if name not in MODEL_RUNTIMES:
        raise ConfigError(f"STEELFRAME_RUNTIME: runtime {name!r} is not available in this build")
    if not settings.model:
        raise ConfigError(f"STEELFRAME_MODEL: required when STEELFRAME_RUNTIME={name}")
    return _model_runtime(name, settings.model, None, settings, http)


def _fallback(
    entry: Any,
    position: int,
    primary: str,
    settings: Settings,
    http: aiohttp.ClientSession | None,
) -> Runtime:
    where = f"STEELFRAME_FALLBACKS[{position}]"
    if isinstance(entry, str):
        entry = {"model": entry}
    if not isinstance(entry, dict):
        raise ConfigError(f'{where}: must be a model name or {{"runtime", "model", "base_url"}}')
    unknown = sorted(set(entry) - _FALLBACK_KEYS)
    if unknown:
        raise ConfigError(f"{where}: unknown keys {unknown} (allowed: runtime, model, base_url)")
    runtime = entry.get("runtime", primary)
    if runtime not in MODEL_RUNTIMES:
        raise ConfigError(f"{where}: runtime must be one of {', '.join(MODEL_RUNTIMES)}")
    model = entry.get("model")
    if not isinstance(model, str) or not model:
        raise ConfigError(f"{where}: model must be a non-empty string")
    base_url = entry.get("base_url")
    if base_url is not None and (
        not isinstance(base_url, str) or not base_url.startswith(("http://", "https://"))
    ):
        raise ConfigError(f"{where}: base_url must be an http(s) URL")
    return _model_runtime(runtime, model, base_url, settings, http)


def _model_runtime(
    kind: str,
    model: str,
    base_url: str | None,
    settings: Settings,
    http: aiohttp.ClientSession | None,
) -> Runtime:
    configured = settings.openai_base_url if kind == "openai" else settings.anthropic_base_url
    key = settings.openai_api_key if kind == "openai" else settings.anthropic_api_key
    endpoint = Endpoint(
        base_url=base_url or configured,
        api_key=_key_for(base_url, configured, key),
        read_timeout=settings.model_timeout_seconds,
    )
    window = context_window(settings, model)
    if kind == "openai":
        return OpenAIRuntime(
            model=model,
            endpoint=endpoint,
            context_tokens=window,
            tool_rounds=settings.tool_rounds,
            http=http,
        )
    return AnthropicRuntime(
        model=model,
        endpoint=endpoint,
        context_tokens=window,
        tool_rounds=settings.tool_rounds,
        thinking_tokens=settings.thinking_tokens,
        http=http,
    )


def _key_for(base_url: str | None, configured: str, key: Secret | None) -> Secret | None:
    """The configured key belongs to the configured base URL: never send it elsewhere."""
    if base_url is None or base_url.rstrip("/") == configured.rstrip("/"):
        return key
    return None
