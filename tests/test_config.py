"""Settings: environment, steelframe.toml, validation messages that name the variable."""

from __future__ import annotations

from pathlib import Path

import pytest

from bot.config import ConfigError, Settings


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
