"""The agent presets: which binary, which version is supported, which variables carry its
API key, and the command the worker runs for it (the adapter, speaking the coding-command
protocol, so the coding sandbox wraps every agent the same way)."""

from __future__ import annotations

import re
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from enum import StrEnum


class Agent(StrEnum):
    DEMO = "demo"
    COMMAND = "command"
    CLAUDE = "claude"
    CODEX = "codex"
    AIDER = "aider"


@dataclass(frozen=True)
class Preset:
    agent: Agent
    binary: str
    label: str
    # Versions the parser was written against (docs/runtimes.md, "Coding agents").
    pinned: str
    supported: re.Pattern[str]
    # The variables that carry the agent's credentials and endpoint: the only ones of the
    # worker's environment the coding sandbox passes on for this agent.
    key_variables: tuple[str, ...]
    install: str
    # The agent's own settings (`CLAUDE_CODE_USE_BEDROCK`, `AIDER_MODEL`, ...) also pass.
    own_prefixes: tuple[str, ...] = ()
    # Its provider's API (host:port), on every run's egress allowlist, and the variables
    # naming another base URL, whose host is allowed instead when the operator sets one.
    api_hosts: tuple[str, ...] = ()
    url_variables: tuple[str, ...] = ()

    def supports(self, version: str) -> bool:
        return bool(self.supported.fullmatch(version))


# A table, one entry per agent: the entries share a shape, not logic.
PRESETS = {
    Agent.CLAUDE: Preset(
        Agent.CLAUDE,
        "claude",
        "Claude Code",
        "2.1.332",
        re.compile(r"2\.1\.\d+"),
        ("ANTHROPIC_API_KEY", "ANTHROPIC_AUTH_TOKEN", "ANTHROPIC_BASE_URL"),
        "npm install -g @anthropic-ai/claude-code@2.1.332",
        ("CLAUDE_CODE_", "ANTHROPIC_"),
        ("api.anthropic.com:443",),
        ("ANTHROPIC_BASE_URL",),
    ),
    Agent.CODEX: Preset(
        Agent.CODEX,
        "codex",
        "Codex CLI",
        "0.171.0",
        re.compile(r"0\.171\.\d+"),
        ("CODEX_API_KEY", "OPENAI_API_KEY", "OPENAI_BASE_URL"),
        "npm install -g @openai/codex@0.171.0",
        ("CODEX_",),
        ("api.openai.com:443",),
        ("OPENAI_BASE_URL",),
    ),
    Agent.AIDER: Preset(
        Agent.AIDER,
        "aider",
        "aider",
        "0.86.2",
        re.compile(r"0\.86\.\d+(\.dev\d*)?"),
        ("OPENAI_API_KEY", "ANTHROPIC_API_KEY", "OPENAI_API_BASE"),
        "python -m pip install aider-chat==0.86.2 (in a virtualenv of its own)",
        ("AIDER_",),
        ("api.openai.com:443", "api.anthropic.com:443"),
        ("OPENAI_API_BASE",),
    ),
}
# What any agent may see of the environment besides its own variables: where programs are,
# locale, time zone, temporary files, certificates and proxies.
BASE_VARIABLES = frozenset(
    {
        "PATH", "HOME", "LANG", "LANGUAGE", "TERM", "TZ", "TMPDIR", "USER", "LOGNAME",
        "SSL_CERT_FILE", "SSL_CERT_DIR", "REQUESTS_CA_BUNDLE", "NODE_EXTRA_CA_CERTS",
        "HTTP_PROXY", "HTTPS_PROXY", "NO_PROXY", "http_proxy", "https_proxy", "no_proxy",
    }
)  # fmt: skip


def agent_environment(environ: Mapping[str, str], preset: Preset) -> dict[str, str]:
    """The environment an agent runs with: an allowlist. Another agent's key (an
    `OPENAI_API_KEY` set for Chat, say) never reaches Claude Code."""
    return {
        name: value
        for name, value in environ.items()
        if name in BASE_VARIABLES
        or name.startswith("LC_")
        or name in preset.key_variables
        or name.startswith(preset.own_prefixes)
    }


_VERSION = re.compile(r"\d+\.\d+\.\d+(?:\.dev\d*)?")


def version_in(output: str) -> str | None:
    """The version a `--version` prints: `2.1.332 (Claude Code)`, `codex-cli 0.171.0`,
    `aider 0.86.2`."""
    found = _VERSION.search(output)
    return found.group(0) if found else None


def adapter_command(agent: Agent) -> tuple[str, ...]:
    """The command the worker runs for a preset: this interpreter, isolated (`-I`: neither
    the checkout nor PYTHON* variables can change what is imported), running the adapter."""
    return (sys.executable, "-I", "-m", "bot.lifecycle.agents.adapter", agent.value)


def demo_command() -> tuple[str, ...]:
    return (sys.executable, "-I", "-m", "bot.lifecycle.agents.demo")
