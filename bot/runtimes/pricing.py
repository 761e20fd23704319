"""Turn cost from token usage and the configured prices (STEELFRAME_MODEL_PRICES).

Prices are USD per million tokens, by the model name as configured (the name a route was
given, which is also what `Route.model` reports):

    {"gpt-4o-mini": {"input": 0.15, "output": 0.60}}

A model without a price has an unknown cost (None), never a cost of zero.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from bot.config_values import ConfigError
from bot.contracts.turn_meta import UsageMeta

PER_TOKENS = 1_000_000


@dataclass(frozen=True)
class Price:
    input: float  # USD per million input tokens
    output: float  # USD per million output tokens


def parse_prices(raw: Mapping[str, Any]) -> dict[str, Price]:
    """Validated prices; ConfigError naming STEELFRAME_MODEL_PRICES and the model if not."""
    prices: dict[str, Price] = {}
    for model, entry in raw.items():
        where = f"STEELFRAME_MODEL_PRICES: model {model!r}"
        if not isinstance(entry, Mapping) or set(entry) - {"input", "output"}:
            raise ConfigError(
                f'{where} must be an object {{"input": USD, "output": USD}} per 1M tokens'
            )
        values = {key: entry.get(key, 0) for key in ("input", "output")}
        for key, value in values.items():
            if isinstance(value, bool) or not isinstance(value, int | float) or value < 0:
                raise ConfigError(f"{where}: {key} must be a number >= 0 (USD per 1M tokens)")
        prices[model] = Price(input=float(values["input"]), output=float(values["output"]))
    return prices


def cost_usd(prices: Mapping[str, Any], model: str, usage: UsageMeta) -> float | None:
    """USD for a turn's `usage` on `model`; None if unpriced."""
    if model not in prices:
        return None
    try:
        entry = parse_prices({model: prices[model]})[model]
    except ConfigError:
        return None  # start-up validation reports it; a turn never fails on a price
    total = usage["input_tokens"] * entry.input + usage["output_tokens"] * entry.output
    return round(total / PER_TOKENS, 6)
