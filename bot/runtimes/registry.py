"""Model runtimes by name. `offline` is built in; the model runtimes live beside it."""

from __future__ import annotations

from bot.config import AgentConfig, ConfigError, Settings
from bot.runtimes.base import Runtime
from bot.runtimes.offline import OfflineRuntime


def build_runtime(name: str, settings: Settings, agent: AgentConfig) -> Runtime:
    if name == "offline":
        return OfflineRuntime()
    raise ConfigError(f"STEELFRAME_RUNTIME: runtime {name!r} is not available in this build")
