"""The settings of the chat models: which runtime answers, its model, limits, prices and
endpoints (docs/runtimes.md). One part of `bot.config.Settings`."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bot.config_values import (
    RUNTIMES,
    ConfigError,
    Secret,
    parse_bool,
    parse_float,
    parse_json_list,
    parse_json_object,
    parse_non_negative_int,
    parse_positive_int,
    parse_runtime,
    parse_secret,
    parse_str,
    setting,
)

EMBEDDINGS_PROVIDERS = ("off", "openai", "ollama", "local", "onnx")
# `local`: wordllama's model shipped inside its wheel, run in-process (bot/chat/embeddings_local.py)
LOCAL_EMBEDDINGS_MODEL = "l2_supercat"
# `onnx`: an encoder exported to ONNX in a directory the operator names, run in-process
# (bot/chat/embeddings_onnx.py); its model setting is that directory.
ONNX_FILES = ("model.onnx", "tokenizer.json")


def parse_embeddings_provider(value: str) -> str:
    lowered = value.strip().lower()
    if lowered not in EMBEDDINGS_PROVIDERS:
        raise ValueError(f"must be one of {', '.join(EMBEDDINGS_PROVIDERS)}")
    return lowered


@dataclass(frozen=True)
class ModelSettings:
    """Which model answers Chat, and how it is reached."""

    runtime: str = setting("STEELFRAME_RUNTIME", parse_runtime, "|".join(RUNTIMES), "offline")
    model: str | None = setting("STEELFRAME_MODEL", parse_str, "model name for openai/anthropic")
    fallbacks: list[Any] = setting(
        "STEELFRAME_FALLBACKS", parse_json_list, "ordered fallback routes (JSON)", []
    )
    model_prices: dict[str, Any] = setting(
        "STEELFRAME_MODEL_PRICES", parse_json_object, "USD per 1M tokens", {}
    )
    context_tokens: int = setting(
        "STEELFRAME_CONTEXT_TOKENS", parse_positive_int, "context window", 32_000
    )
    chat_command: str | None = setting(
        "STEELFRAME_CHAT_COMMAND", parse_str, "command runtime: the CLI to run"
    )
    model_context: dict[str, Any] = setting(
        "STEELFRAME_MODEL_CONTEXT", parse_json_object, "context tokens by model", {}
    )
    model_timeout_seconds: float = setting(
        "STEELFRAME_MODEL_TIMEOUT_SECONDS", parse_float, "idle model wait", 120.0
    )
    model_connections: int = setting(
        "STEELFRAME_MODEL_CONNECTIONS",
        parse_positive_int,
        "model streams a process holds open at once",
        1000,
    )
    model_connections_per_host: int = setting(
        "STEELFRAME_MODEL_CONNECTIONS_PER_HOST",
        parse_non_negative_int,
        "at most this many to one provider host; 0: no cap",
        0,
    )
    tool_rounds: int = setting(
        "STEELFRAME_TOOL_ROUNDS", parse_non_negative_int, "repo tool rounds; 0=off", 4
    )
    thinking_tokens: int = setting(
        "STEELFRAME_THINKING_TOKENS", parse_non_negative_int, "anthropic thinking", 0
    )
    openai_base_url: str = setting(
        "OPENAI_BASE_URL", parse_str, "OpenAI-compatible base URL", "https://api.openai.com/v1"
    )
    openai_api_key: Secret | None = setting("OPENAI_API_KEY", parse_secret, "secret")
    anthropic_base_url: str = setting(
        "ANTHROPIC_BASE_URL", parse_str, "Anthropic base URL", "https://api.anthropic.com"
    )
    anthropic_api_key: Secret | None = setting("ANTHROPIC_API_KEY", parse_secret, "secret")
    # -- grounding (bot/chat/retrieval.py, bot/chat/search_words.py) --
    # Rounds 2 and 3 also search with words the model proposes: one short extra model call
    # per turn (docs/memory.md). Off by default for that cost; the offline runtime never asks.
    chat_model_search_words: bool = setting(
        "STEELFRAME_CHAT_MODEL_SEARCH_WORDS",
        parse_bool,
        "ask the model for search words each turn (one short extra model call)",
        False,
    )
    # Hybrid ranking (bot/chat/hybrid.py): dense vectors from the provider's embeddings
    # endpoint (or `local`: a small model in-process) fused with round 1's lexical ranking.
    # Off by default: it costs an embeddings call per turn and 4 bytes per dimension per
    # chunk on disk (docs/memory.md).
    chat_embeddings: str = setting(
        "STEELFRAME_CHAT_EMBEDDINGS",
        parse_embeddings_provider,
        "|".join(EMBEDDINGS_PROVIDERS),
        "off",
    )
    chat_embeddings_model: str | None = setting(
        "STEELFRAME_CHAT_EMBEDDINGS_MODEL",
        parse_str,
        f"embeddings model name (local: {LOCAL_EMBEDDINGS_MODEL}; onnx: the model's directory)",
    )
    chat_embeddings_url: str | None = setting(
        "STEELFRAME_CHAT_EMBEDDINGS_URL",
        parse_str,
        "embeddings base URL; default: OPENAI_BASE_URL (ollama: without /v1)",
    )

    def embeddings(self) -> EmbeddingsSettings | None:
        """The embeddings endpoint when hybrid ranking is on (None when off); a
        ConfigError naming the variable when it is on but cannot work."""
        if self.chat_embeddings == "off":
            return None
        if self.chat_embeddings == "local":  # in-process: no URL, no key
            model = self.chat_embeddings_model or LOCAL_EMBEDDINGS_MODEL
            return EmbeddingsSettings(provider="local", model=model, base_url="", api_key=None)
        if self.chat_embeddings == "onnx":
            return _onnx_settings(self.chat_embeddings_model)
        if not self.chat_embeddings_model:
            raise ConfigError(
                "STEELFRAME_CHAT_EMBEDDINGS_MODEL: required when "
                f"STEELFRAME_CHAT_EMBEDDINGS={self.chat_embeddings}"
            )
        configured = self.openai_base_url.rstrip("/")
        url = (self.chat_embeddings_url or "").rstrip("/")
        if not url:
            # Ollama serves its own API at the root its OpenAI-compatible `/v1` hangs off.
            ollama = self.chat_embeddings == "ollama" and configured.endswith("/v1")
            url = configured.removesuffix("/v1") if ollama else configured
        if not url.startswith(("http://", "https://")):
            raise ConfigError(f"STEELFRAME_CHAT_EMBEDDINGS_URL: {url!r} is not an http(s) URL")
        # The OpenAI key belongs to OPENAI_BASE_URL: never sent to another host.
        same = self.chat_embeddings == "openai" and url == configured
        return EmbeddingsSettings(
            provider=self.chat_embeddings,
            model=self.chat_embeddings_model,
            base_url=url,
            api_key=self.openai_api_key if same else None,
        )


def _onnx_settings(directory: str | None) -> EmbeddingsSettings:
    """In-process from the operator's directory: no URL, no key. Checked at start-up so a
    wrong path stops the service naming it instead of failing every turn's dense round."""
    if not directory:
        raise ConfigError(
            "STEELFRAME_CHAT_EMBEDDINGS_MODEL: required when STEELFRAME_CHAT_EMBEDDINGS=onnx "
            f"(a directory holding {' and '.join(ONNX_FILES)})"
        )
    path = Path(directory).expanduser().resolve()
    absent = [name for name in ONNX_FILES if not (path / name).is_file()]
    if absent:
        raise ConfigError(f"STEELFRAME_CHAT_EMBEDDINGS_MODEL: {path} has no {' or '.join(absent)}")
    return EmbeddingsSettings(provider="onnx", model=str(path), base_url="", api_key=None)


@dataclass(frozen=True)
class EmbeddingsSettings:
    """Where the hybrid ranking's vectors come from (STEELFRAME_CHAT_EMBEDDINGS*)."""

    # "openai" (OpenAI, vLLM, llama.cpp...: POST /embeddings), "ollama", "local", "onnx"
    provider: str
    model: str  # onnx: the model directory, resolved
    base_url: str  # "" for local and onnx
    api_key: Secret | None
