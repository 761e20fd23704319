"""Settings: environment, steelframe.toml, validation messages that name the variable."""

from __future__ import annotations

import base64
from pathlib import Path

import pytest

from bot.config import FIELDS, Settings
from bot.config_values import ConfigError


def test_defaults_and_overrides() -> None:
    settings = Settings.from_env({"STEELFRAME_REDIS_URL": "redis://x:1/0", "APP_ID": "12"})
    assert settings.database_url == f"sqlite:///{Path('var').resolve() / 'steelframe.db'}"
    assert settings.data_dir == Path("var").resolve()
    assert settings.redis_url == "redis://x:1/0" and settings.app_id == 12
    assert settings.pickup_labels == ("steelframe:work-on-this",)


@pytest.mark.parametrize(
    ("env", "name"),
    [
        ({"STEELFRAME_RUNTIME": "gpt"}, "STEELFRAME_RUNTIME"),
        ({"APP_ID": "abc"}, "APP_ID"),
        ({"STEELFRAME_CHAT_MAX_BODY": "-1"}, "STEELFRAME_CHAT_MAX_BODY"),
        ({"STEELFRAME_REPO": "no-slash"}, "STEELFRAME_REPO"),
        ({"STEELFRAME_FALLBACKS": "{}"}, "STEELFRAME_FALLBACKS"),
        ({"STEELFRAME_WHATEVER": "1"}, "STEELFRAME_WHATEVER"),
        ({"STEELFRAME_RUNTIME": "command"}, "STEELFRAME_CHAT_COMMAND"),
        ({"STEELFRAME_AGENTS": '{"x": {"repo": "bad"}}'}, "STEELFRAME_AGENTS"),
        ({"STEELFRAME_HEARTBEAT_SECONDS": "0"}, "STEELFRAME_HEARTBEAT_SECONDS"),
        ({"STEELFRAME_TURN_TIMEOUT_SECONDS": "inf"}, "STEELFRAME_TURN_TIMEOUT_SECONDS"),
        # redis-py's own ValueError traceback at the first connection, before.
        ({"STEELFRAME_REDIS_URL": "http://127.0.0.1:6379/7"}, "STEELFRAME_REDIS_URL"),
        ({"STEELFRAME_REDIS_URL": "127.0.0.1:6379"}, "STEELFRAME_REDIS_URL"),
    ],
)
def test_bad_values_name_the_variable(env: dict[str, str], name: str) -> None:
    with pytest.raises(ConfigError, match=name):
        Settings.from_env(env)


def test_secrets_are_masked() -> None:
    settings = Settings.from_env({"OPENAI_API_KEY": "sk-very-secret", "WEBHOOK_SECRET": "hush"})
    assert "sk-very-secret" not in repr(settings)
    assert "hush" not in str(settings.redacted())
    assert (
        settings.openai_api_key is not None and settings.openai_api_key.reveal() == "sk-very-secret"
    )


def test_connection_url_passwords_are_masked() -> None:
    settings = Settings.from_env(
        {
            "STEELFRAME_DATABASE_URL": "postgresql://bot:s3cret@db:5432/steelframe",
            "STEELFRAME_REDIS_URL": "redis://:hunter2@cache:6379/0",
        }
    )
    shown = settings.redacted()
    assert "s3cret" not in str(shown) and "hunter2" not in str(shown)
    assert shown["STEELFRAME_DATABASE_URL"] == "postgresql://bot:***@db:5432/steelframe"


def test_bad_secret_value_does_not_echo_it() -> None:
    with pytest.raises(ConfigError) as info:
        Settings.from_env({"APP_ID": "not-a-number-secretish"})
    assert "APP_ID" in str(info.value)


def test_toml_adds_and_env_wins(tmp_path: Path) -> None:
    toml = tmp_path / "steelframe.toml"
    toml.write_text(
        'runtime = "offline"\nrepo = "acme/widgets"\npickup_labels = ["a", "b"]\n'
        '[agents.docs]\nrepo = "acme/docs"\ncheckout = "/srv/docs"\n'
    )
    settings = Settings.from_env({"STEELFRAME_REPO": "acme/env"}, toml_path=toml)
    assert settings.repo == "acme/env" and settings.pickup_labels == ("a", "b")
    assert settings.agents["docs"].repo == "acme/docs"
    assert set(settings.agents) == {"default", "docs"}


def test_toml_unknown_key_is_refused(tmp_path: Path) -> None:
    toml = tmp_path / "steelframe.toml"
    toml.write_text("colour = 'red'\n")
    with pytest.raises(ConfigError, match="colour"):
        Settings.from_env({}, toml_path=toml)


def test_a_bad_value_in_a_file_names_the_file_and_the_key_as_written_there(
    tmp_path: Path,
) -> None:
    """A newcomer who never exported STEELFRAME_RUNTIME looks for it in the shell: the error
    says which file holds it (the TOML key as spelled there, and its variable)."""
    toml = tmp_path / "steelframe.toml"
    toml.write_text('runtime = "openia"\n')
    with pytest.raises(ConfigError) as in_toml:
        Settings.from_env({}, toml_path=toml)
    assert str(in_toml.value) == (
        f"{toml}: runtime (STEELFRAME_RUNTIME): 'openia' is not valid: must be one of "
        "offline, openai, anthropic, command"
    )
    with pytest.raises(ConfigError) as in_dotenv:
        Settings.from_env({}, dotenv={"STEELFRAME_RUNTIME": "openia"})
    assert str(in_dotenv.value).startswith(".env: STEELFRAME_RUNTIME: 'openia' is not valid")
    with pytest.raises(ConfigError) as unknown:
        Settings.from_env({}, dotenv={"STEELFRAME_RUNTIM": "openai"})
    assert (
        str(unknown.value) == ".env: STEELFRAME_RUNTIM: unknown setting (see docs/configuration.md)"
    )
    with pytest.raises(ConfigError) as in_shell:  # the environment's own: the name says it
        Settings.from_env({"STEELFRAME_RUNTIME": "openia"})
    assert str(in_shell.value).startswith("STEELFRAME_RUNTIME: 'openia' is not valid")


# -- Probot's conventions (docs/github.md, "Probot's names") ---------------------------------


def test_log_level_is_probots_name_and_the_steelframe_name_wins() -> None:
    assert Settings.from_env({"LOG_LEVEL": "debug"}).log_level == "debug"
    both = {"LOG_LEVEL": "debug", "STEELFRAME_LOG_LEVEL": "WARNING"}
    assert Settings.from_env(both).log_level == "WARNING"
    with pytest.raises(ConfigError, match="LOG_LEVEL"):
        Settings.from_env({"LOG_LEVEL": "loud"})


def test_host_and_port_set_where_the_service_listens() -> None:
    settings = Settings.from_env({"PORT": "3000", "HOST": "0.0.0.0"})
    assert (settings.host, settings.port) == ("0.0.0.0", 3000)
    with pytest.raises(ConfigError, match="PORT"):
        Settings.from_env({"PORT": "70000"})


def test_private_key_may_be_base64_of_the_pem() -> None:
    pem = "-----BEGIN RSA PRIVATE KEY-----\nMIIB\n-----END RSA PRIVATE KEY-----\n"
    encoded = base64.b64encode(pem.encode()).decode()
    key = Settings.from_env({"PRIVATE_KEY": encoded}).private_key_pem()
    assert key is not None and key.reveal() == pem
    escaped = pem.replace("\n", "\\n")
    key = Settings.from_env({"PRIVATE_KEY": escaped}).private_key_pem()
    assert key is not None and key.reveal() == pem


def test_a_private_key_that_is_neither_pem_nor_base64_is_refused_without_echo() -> None:
    with pytest.raises(ConfigError, match="PRIVATE_KEY") as info:
        Settings.from_env({"PRIVATE_KEY": "not-a-key-at-all"})
    assert "not-a-key-at-all" not in str(info.value)


def test_ghe_host_sets_the_api_url_unless_github_api_url_does() -> None:
    settings = Settings.from_env({"GHE_HOST": "github.example.com"})
    assert settings.github_api_url == "https://github.example.com/api/v3"
    settings = Settings.from_env({"GHE_HOST": "ghe.local", "GHE_PROTOCOL": "http"})
    assert settings.github_api_url == "http://ghe.local/api/v3"
    explicit = {"GHE_HOST": "ghe.local", "GITHUB_API_URL": "https://api.ghe.local"}
    assert Settings.from_env(explicit).github_api_url == "https://api.ghe.local"
    with pytest.raises(ConfigError, match="GHE_HOST"):
        Settings.from_env({"GHE_HOST": "https://ghe.local"})


def test_dotenv_fills_in_but_never_overrides_the_environment() -> None:
    settings = Settings.from_env(
        {"APP_ID": "7"}, dotenv={"APP_ID": "99", "WEBHOOK_SECRET": "from-file"}
    )
    assert settings.app_id == 7
    assert settings.webhook_secret is not None and settings.webhook_secret.reveal() == "from-file"
    assert settings.sources["app_id"] == "environment"
    assert settings.sources["webhook_secret"] == ".env"
    with pytest.raises(ConfigError, match="STEELFRAME_NOPE"):
        Settings.from_env({}, dotenv={"STEELFRAME_NOPE": "1"})


def test_the_tuis_variables_live_beside_the_services() -> None:
    settings = Settings.from_env(
        {"STEELFRAME_TOKEN": "sfo_x", "STEELFRAME_URL": "http://127.0.0.1:8080"}
    )
    assert settings.runtime == "offline"


def test_every_setting_is_described_with_value_source_and_default() -> None:
    settings = Settings.from_env(
        {"WEBHOOK_SECRET": "hush", "STEELFRAME_RUNTIME": "offline"},
        defaults={"database_url": "sqlite:///var/dev.db"},
    )
    rows = {row[0]: row for row in settings.described()}
    assert set(rows) == {spec.env for spec in FIELDS}
    assert rows["WEBHOOK_SECRET"][1] == "Secret('**********')"
    assert rows["STEELFRAME_RUNTIME"][2] == "environment"
    assert rows["STEELFRAME_DATABASE_URL"][1:4] == (
        "sqlite:///var/dev.db",
        "dev default",
        "sqlite:///var/steelframe.db",
    )
    assert all("object at 0x" not in cell for row in rows.values() for cell in row)


@pytest.mark.parametrize(
    ("value", "reason"),
    [
        ("60600", "START-END"),
        ("60999-60600", "starts after it ends"),
        ("0-999", "includes uid 0"),
        ("65000-66000", "includes uid 65534"),
        ("100-2147483647", "signed"),
        ("a-b", "START-END"),
    ],
)
def test_a_bad_sandbox_uid_range_is_refused_saying_why(value: str, reason: str) -> None:
    with pytest.raises(ConfigError, match=f"STEELFRAME_SANDBOX_UID_RANGE: '{value}'.*{reason}"):
        Settings.from_env({"STEELFRAME_SANDBOX_UID_RANGE": value})


def test_the_sandbox_uid_range_has_a_default_and_off_means_nobody() -> None:
    assert str(Settings.from_env({}).sandbox_uid_range) == "60600-60999"
    chosen = Settings.from_env({"STEELFRAME_SANDBOX_UID_RANGE": " 70000-70009 "})
    assert chosen.sandbox_uid_range is not None and len(chosen.sandbox_uid_range) == 10
    assert Settings.from_env({"STEELFRAME_SANDBOX_UID_RANGE": "off"}).sandbox_uid_range is None


@pytest.mark.parametrize("value", ["a b", "-lead", "q/ueue", "x" * 101])
def test_a_bad_task_queue_name_is_refused_saying_which_variable(value: str) -> None:
    with pytest.raises(ConfigError, match=r"STEELFRAME_TASK_QUEUE: .* must be 1-100 letters"):
        Settings.from_env({"STEELFRAME_TASK_QUEUE": value})


def test_the_task_queue_has_a_default_and_a_deployment_names_its_own() -> None:
    assert Settings.from_env({}).task_queue == "steelframe-lifecycle"
    named = Settings.from_env({"STEELFRAME_TASK_QUEUE": " staging:lifecycle "})
    assert named.task_queue == "staging:lifecycle"


def test_a_bad_redis_url_is_named_without_its_password() -> None:
    with pytest.raises(ConfigError, match="STEELFRAME_REDIS_URL") as refused:
        Settings.from_env({"STEELFRAME_REDIS_URL": "http://:hunter2@127.0.0.1:6379/7"})
    assert "hunter2" not in str(refused.value)
