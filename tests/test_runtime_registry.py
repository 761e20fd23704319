"""Building runtimes from settings: names, fallback shapes, context windows, prices, cost."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from bot.config import Settings
from bot.config_values import ConfigError, Secret
from bot.contracts.turn_meta import UsageMeta
from bot.runtimes.anthropic import AnthropicRuntime
from bot.runtimes.base import ChatMessage, ContextBudget
from bot.runtimes.budget import fit_history, trim_text
from bot.runtimes.command import CommandRuntime
from bot.runtimes.fallback import FallbackRuntime
from bot.runtimes.offline import OfflineRuntime
from bot.runtimes.openai import OpenAIRuntime
from bot.runtimes.pricing import cost_usd, parse_prices
from bot.runtimes.registry import build_runtime, check_runtime_settings
from bot.runtimes.transport import SharedClient, UpstreamFailure, endpoint_label, redact
from tests.conftest import make_settings


def build(settings: Settings, name: str | None = None) -> Any:
    return build_runtime(name or settings.runtime, settings, settings.agents["default"])


def test_each_runtime_is_built_by_name(tmp_path: Path) -> None:
    settings = make_settings(
        tmp_path,
        model="m1",
        chat_command="my-cli --json",
        model_context={"m1": 100_000},
        tool_rounds=2,
        thinking_tokens=2048,
    )
    assert isinstance(build(settings, "offline"), OfflineRuntime)
    openai = build(settings, "openai")
    assert isinstance(openai, OpenAIRuntime)
    assert (openai.model, openai.context_tokens, openai.tool_rounds) == ("m1", 100_000, 2)
    anthropic = build(settings, "anthropic")
    assert isinstance(anthropic, AnthropicRuntime) and anthropic.thinking_tokens == 2048
    assert anthropic.endpoint.url("v1/messages") == "https://api.anthropic.com/v1/messages"
    command = build(settings, "command")
    assert isinstance(command, CommandRuntime) and command.argv == ["my-cli", "--json"]
    assert command.endpoint == "command:my-cli"


def test_fallbacks_accept_names_and_objects_with_their_own_windows(tmp_path: Path) -> None:
    settings = make_settings(
        tmp_path,
        runtime="openai",
        model="big",
        context_tokens=8_000,
        model_context={"small": 4_000, "claude-x": 200_000},
        fallbacks=[
            "small",
            {"runtime": "anthropic", "model": "claude-x"},
            {"model": "local", "base_url": "http://127.0.0.1:11434/v1"},
        ],
        openai_api_key=Secret("sk-primary-0000000000"),
    )
    runtime = build(settings)
    assert isinstance(runtime, FallbackRuntime) and runtime.model == "big"
    routes: list[Any] = runtime.routes
    kinds = [(type(r).__name__, r.model, r.context_tokens) for r in routes]
    assert kinds == [
        ("OpenAIRuntime", "big", 8_000),
        ("OpenAIRuntime", "small", 4_000),
        ("AnthropicRuntime", "claude-x", 200_000),
        ("OpenAIRuntime", "local", 8_000),
    ]
    assert routes[1].endpoint.api_key == Secret("sk-primary-0000000000")
    assert routes[3].endpoint.api_key is None  # another host never gets the key


@pytest.mark.parametrize(
    ("overrides", "variable"),
    [
        ({"runtime": "openai"}, "STEELFRAME_MODEL"),
        ({"runtime": "anthropic"}, "STEELFRAME_MODEL"),
        ({"fallbacks": [42]}, "STEELFRAME_FALLBACKS[0]"),
        ({"fallbacks": [{"model": "x", "key": "sk-..."}]}, "STEELFRAME_FALLBACKS[0]"),
        ({"fallbacks": ["ok", {"runtime": "command", "model": "x"}]}, "STEELFRAME_FALLBACKS[1]"),
        ({"fallbacks": [{"model": ""}]}, "STEELFRAME_FALLBACKS[0]"),
        ({"fallbacks": [{"model": "x", "base_url": "ftp://h"}]}, "STEELFRAME_FALLBACKS[0]"),
        ({"model_prices": {"m": 3}}, "STEELFRAME_MODEL_PRICES"),
        ({"model_prices": {"m": {"input": -1}}}, "STEELFRAME_MODEL_PRICES"),
        ({"model_prices": {"m": {"input": 1, "cached": 2}}}, "STEELFRAME_MODEL_PRICES"),
        ({"model_context": {"m": 0}}, "STEELFRAME_MODEL_CONTEXT"),
        ({"model_context": {"m": "lots"}}, "STEELFRAME_MODEL_CONTEXT"),
        ({"thinking_tokens": 500}, "STEELFRAME_THINKING_TOKENS"),
        ({"model_timeout_seconds": 0}, "STEELFRAME_MODEL_TIMEOUT_SECONDS"),
    ],
)
def test_bad_runtime_settings_stop_start_up_naming_the_variable(
    tmp_path: Path, overrides: dict[str, Any], variable: str
) -> None:
    values: dict[str, Any] = {"runtime": "openai", "model": "m"}
    values.update(overrides)
    if overrides.get("runtime") and "model" not in overrides:
        values.pop("model")
    settings = make_settings(tmp_path, **values)
    with pytest.raises(ConfigError) as caught:
        check_runtime_settings(settings)
    assert str(caught.value).startswith(variable)


def test_new_settings_parse_from_the_environment(tmp_path: Path) -> None:
    settings = Settings.from_env(
        {
            "STEELFRAME_MODEL_CONTEXT": '{"gpt-4o": 128000}',
            "STEELFRAME_MODEL_TIMEOUT_SECONDS": "30",
            "STEELFRAME_TOOL_ROUNDS": "0",
            "STEELFRAME_THINKING_TOKENS": "4096",
        }
    )
    assert settings.model_context == {"gpt-4o": 128000}
    assert (settings.model_timeout_seconds, settings.tool_rounds, settings.thinking_tokens) == (
        30.0,
        0,
        4096,
    )
    for bad in ({"STEELFRAME_TOOL_ROUNDS": "-1"}, {"STEELFRAME_MODEL_CONTEXT": "[1]"}):
        with pytest.raises(ConfigError):
            Settings.from_env(bad)


def test_cost_from_prices_per_million_tokens() -> None:
    prices = {"gpt-4o-mini": {"input": 0.15, "output": 0.6}}
    assert parse_prices(prices)["gpt-4o-mini"].output == 0.6
    usage: UsageMeta = {"input_tokens": 2_000_000, "output_tokens": 500_000}
    assert cost_usd(prices, "gpt-4o-mini", usage) == pytest.approx(0.6)
    assert cost_usd(prices, "unpriced", usage) is None
    assert cost_usd({"bad": "free"}, "bad", usage) is None  # never fails a turn


def test_fit_history_keeps_the_newest_turns_starting_with_a_user_turn() -> None:
    history = [
        ChatMessage(role="user" if n % 2 == 0 else "assistant", content=f"m{n} " + "w" * 350)
        for n in range(10)
    ]
    latest = ChatMessage(role="user", content="now?")
    fitted = fit_history("sys", [*history, latest], window=700, reserve=300, model="m")
    assert fitted.messages[-1] == latest and fitted.messages[0].role == "user"
    assert fitted.messages[0].content.startswith("m8 ")
    assert fitted.budget.trimmed and fitted.budget.after_tokens <= 400
    untouched = fit_history("sys", [latest], window=700, reserve=300, model="m")
    assert not untouched.budget.trimmed and untouched.events() == [untouched.budget]


def test_a_message_too_big_for_the_window_is_a_retryable_failure() -> None:
    huge = ChatMessage(role="user", content="z" * 40_000)
    with pytest.raises(UpstreamFailure) as caught:
        fit_history("sys", [huge], window=4_000, reserve=1_000, model="tiny")
    assert (
        caught.value.retryable
        and "do not fit tiny's context window of 4,000" in caught.value.message
    )


def test_trim_text_and_budget_meta() -> None:
    budget = ContextBudget(
        window=8000, before_tokens=12000, after_tokens=5000, before_messages=21, after_messages=7
    )
    assert trim_text(budget) == (
        "history trimmed: 21 → 7 messages (~12,000 → ~5,000 tokens) to fit a 8,000-token window"
    )
    assert budget.as_meta()["trimmed"] is True


def test_endpoint_labels_and_redaction_hide_credentials() -> None:
    assert endpoint_label("https://user:pw@host:8443/v1/?key=abc#x") == "https://host:8443/v1"
    text = "bad key sk-proj-abcdefghijkl and Bearer xyz123 and mine-secret"
    shown = redact(text, ["mine-secret"])
    assert "abcdefghijkl" not in shown and "xyz123" not in shown and "mine-secret" not in shown


async def test_a_shared_client_reaches_every_route_and_closes_once(tmp_path: Path) -> None:
    settings = make_settings(tmp_path, runtime="openai", model="a", fallbacks=["b"])
    shared = SharedClient()
    session = shared.get()
    runtime = build_runtime("openai", settings, settings.agents["default"], http=session)
    assert isinstance(runtime, FallbackRuntime)
    assert all(getattr(route, "http", None) is session for route in runtime.routes)
    assert shared.get() is session
    await shared.close()
    assert session.closed
    await shared.close()  # twice is fine
