"""The repository config's schema: every key read, unknown keys and private hosts refused
with one line naming the problem."""

from __future__ import annotations

import pytest

from bot.config import Settings
from bot.lifecycle.context import LifecyclePolicy
from bot.lifecycle.repo_config import (
    DEFAULT,
    DEFAULT_KEY_FILES,
    RepoAgent,
    RepoConfigError,
    matches_key_file,
    parse,
)
from bot.lifecycle.sandbox import SandboxPolicy
from bot.lifecycle.setup_run import SetupRefused, effective_policy, for_the_prompt, with_registries

FULL = """
setup:
  - npm ci
  - pip install -r requirements.txt
test: npm test
network:
  allow: [registry.npmjs.org, "pypi.org:443", "files.pythonhosted.org"]
agent: codex
model: gpt-5.1-codex
budget:
  tokens: 200000
  usd: 2.5
plan_first: true
instructions: [AGENTS.md, docs/STYLE.md]
setup_secrets: [NPM_TOKEN]
cache:
  key_files: [package-lock.json, "services/*/requirements.txt"]
"""


def test_every_key_is_read() -> None:
    config = parse(FULL)
    assert config.setup == ("npm ci", "pip install -r requirements.txt")
    assert config.test == "npm test"
    assert config.network.allow == ("registry.npmjs.org", "pypi.org:443", "files.pythonhosted.org")
    assert config.agent == RepoAgent.CODEX and config.model == "gpt-5.1-codex"
    assert config.budget.tokens == 200000 and config.budget.usd == 2.5
    assert config.plan_first is True
    assert config.instructions == ("AGENTS.md", "docs/STYLE.md")
    assert config.setup_secrets == ("NPM_TOKEN",)
    assert config.cache.key_files == ("package-lock.json", "services/*/requirements.txt")


def test_an_empty_file_means_the_defaults() -> None:
    assert parse("") == DEFAULT
    assert parse("# nothing yet\n") == DEFAULT
    assert DEFAULT.setup == () and DEFAULT.test is None and not DEFAULT.plan_first
    assert DEFAULT.cache.key_files == DEFAULT_KEY_FILES


@pytest.mark.parametrize(
    ("text", "said"),
    [
        ("setpu: [npm ci]", "unknown field `setpu`"),
        ("network:\n  allow: [pypi.org]\n  deny: [x.org]", "unknown field `deny`"),
        ("cache: {keys: [a]}", "unknown field `keys`"),
        ("setup: npm ci", "Expected `array`, got `str` - at `$.setup`"),
        ("test: ''", "at `$.test`"),
        ("agent: demo", "Invalid enum value 'demo'"),
        ("budget: {tokens: -1}", "at `$.budget.tokens`"),
        ("budget: {usd: lots}", "at `$.budget.usd`"),
        ("plan_first: maybe", "at `$.plan_first`"),
        ("instructions: [../../etc/passwd]", "not a path inside the repository"),
        ("instructions: [/etc/passwd]", "not a path inside the repository"),
        ("setup: [a]\nsetup_secrets: [npm-token]", "not an environment variable name"),
        ("setup_secrets: [NPM_TOKEN]", "there are no setup commands"),
        ("model: 'gpt 5; rm -rf /'", "at `$.model`"),
        ("- a\n- b", "Expected `object`, got `array`"),
    ],
)
def test_a_wrong_config_is_refused_with_one_line_naming_it(text: str, said: str) -> None:
    with pytest.raises(RepoConfigError) as caught:
        parse(text)
    message = str(caught.value)
    assert said in message and "\n" not in message
    assert message.startswith(".steelframe/config.yml")


def test_yaml_that_does_not_parse_is_refused_in_one_line() -> None:
    with pytest.raises(RepoConfigError) as caught:
        parse("setup: [npm ci\ntest: x\n")
    assert "is not valid YAML" in str(caught.value) and "\n" not in str(caught.value)


@pytest.mark.parametrize(
    "host",
    [
        "127.0.0.1",
        "127.0.0.1:6379",
        "10.0.0.5",
        "172.16.3.4:5432",
        "192.168.1.1",
        "169.254.169.254",
        "[::1]:8080",
        "[fe80::1]",
        "[fd00::1]:443",
        "0.0.0.0",
        "100.64.0.1",
        "224.0.0.1",
        "localhost",
        "localhost:6379",
        "redis.localhost",
        "printer.local",
        "metadata.google.internal",
        # IPv6 spellings of this machine and private ranges Python 3.11's `is_global` calls
        # public: 6to4 and IPv4-mapped loopback, site-local (the egress policy's judgement).
        "[2002:7f00:1::1]",
        "[::ffff:127.0.0.1]:6379",
        "[fec0::1]",
    ],
)
def test_a_private_loopback_or_link_local_host_is_refused(host: str) -> None:
    with pytest.raises(RepoConfigError) as caught:
        parse(f"network:\n  allow: [{host!r}]\n")
    assert repr(host) in str(caught.value)


@pytest.mark.parametrize("host", ["pypi.org:0", "pypi.org:70000", "pypi.org:http", "not a host"])
def test_a_malformed_host_is_refused(host: str) -> None:
    with pytest.raises(RepoConfigError):
        parse(f"network:\n  allow: [{host!r}]\n")


@pytest.mark.parametrize(
    "host", ["registry.npmjs.org", "pypi.org:443", "proxy.golang.org.", "8.8.8.8", "[2606::1]:443"]
)
def test_a_public_host_is_allowed(host: str) -> None:
    assert parse(f"network:\n  allow: [{host!r}]\n").network.allow == (host,)


def test_an_oversized_config_is_refused() -> None:
    with pytest.raises(RepoConfigError, match="larger than"):
        parse("setup:\n" + "  - echo hello\n" * 10_000)


def test_key_files_match_by_name_in_any_folder_or_by_whole_path() -> None:
    assert matches_key_file("package-lock.json", DEFAULT_KEY_FILES)
    assert matches_key_file("web/app/package-lock.json", DEFAULT_KEY_FILES)
    assert matches_key_file("requirements-dev.txt", DEFAULT_KEY_FILES)
    assert not matches_key_file("package.json", DEFAULT_KEY_FILES)
    patterns = ("services/*/requirements.txt",)
    assert matches_key_file("services/api/requirements.txt", patterns)
    assert not matches_key_file("requirements.txt", patterns)


def test_a_model_overrides_the_installations_and_the_agent_stays() -> None:
    settings = Settings(coding_agent="claude", coding_model="claude-sonnet-4-5")
    policy = LifecyclePolicy.from_settings(settings)
    chosen = effective_policy(settings, policy, parse("model: claude-opus-4-1"))
    assert chosen.coding_model == "claude-opus-4-1"
    assert chosen.coding_agent == "claude" and chosen.coding_command == policy.coding_command
    assert effective_policy(settings, policy, DEFAULT) is policy


def test_another_agent_only_where_the_installation_allows_it() -> None:
    settings = Settings(coding_agent="claude")
    policy = LifecyclePolicy.from_settings(settings)
    with pytest.raises(SetupRefused, match="does not let repositories choose"):
        effective_policy(settings, policy, parse("agent: codex"))
    allowing = Settings(coding_agent="claude", repo_agents=("codex",))
    chosen = effective_policy(
        allowing, LifecyclePolicy.from_settings(allowing), parse("agent: codex")
    )
    assert chosen.coding_agent == "codex"
    assert chosen.coding_command is not None and chosen.coding_command[-1] == "codex"
    assert "OPENAI_API_KEY" in chosen.sandbox.env_passthrough
    assert "ANTHROPIC_API_KEY" not in chosen.sandbox.env_passthrough


def test_instruction_files_an_agent_reads_natively_stay_out_of_its_prompt() -> None:
    config = parse("instructions: [AGENTS.md, CLAUDE.md, docs/STYLE.md]")
    assert for_the_prompt(config, "claude") == ["AGENTS.md", "docs/STYLE.md"]
    assert for_the_prompt(config, "codex") == ["CLAUDE.md", "docs/STYLE.md"]
    assert for_the_prompt(config, "aider") == ["AGENTS.md", "CLAUDE.md", "docs/STYLE.md"]
    assert for_the_prompt(config, "command") == ["AGENTS.md", "CLAUDE.md", "docs/STYLE.md"]


def test_the_configs_registries_are_added_to_the_runs_allowlist() -> None:
    policy = LifecyclePolicy(sandbox=SandboxPolicy(allow_hosts=("api.anthropic.com:443",)))
    config = parse("network:\n  allow: [registry.npmjs.org, 'pypi.org:443']\n")
    assert with_registries(policy, config).sandbox.allow_hosts == (
        "api.anthropic.com:443",
        "registry.npmjs.org",
        "pypi.org:443",
    )
    assert with_registries(policy, DEFAULT) is policy
