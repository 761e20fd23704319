"""An unauthenticated Redis off loopback is refused at start: `steelframe worker` and
`serve` say so in one line and touch nothing, unless the operator allows it explicitly."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from bot.config import Settings
from bot.config_values import ConfigError
from bot.redis_auth import require_authenticated_redis, unauthenticated_remote_host

# A TEST-NET-1 address (RFC 5737): nothing answers there, and nothing needs to.
REMOTE = "redis://192.0.2.10:6379/0"


@pytest.mark.parametrize(
    ("url", "refused"),
    [
        (REMOTE, "192.0.2.10"),
        ("redis://redis:6379/0", "redis"),  # compose's service name: another host
        ("rediss://cache.example.com:6380", "cache.example.com"),
        ("redis://steelframe@10.0.0.5:6379", "10.0.0.5"),  # an ACL user with no password
        ("redis://[2001:db8::1]:6379", "2001:db8::1"),
        ("redis://127.0.0.1:6379/3", None),
        ("redis://127.8.9.10", None),
        ("redis://localhost:6379", None),
        ("redis://[::1]:6379", None),
        ("redis://", None),  # redis-py's default: localhost
        ("unix:///run/redis.sock?db=0", None),
        ("redis://:s3cret@redis:6379/0", None),
        ("redis://steelframe:s3cret@10.0.0.5:6379", None),
        ("redis://10.0.0.5:6379?password=s3cret", None),
    ],
)
def test_only_a_remote_redis_without_a_password_is_unauthenticated(
    url: str, refused: str | None
) -> None:
    assert unauthenticated_remote_host(url) == refused


def test_the_refusal_can_be_lifted_only_explicitly() -> None:
    settings = Settings.from_env({"STEELFRAME_REDIS_URL": REMOTE})
    with pytest.raises(ConfigError, match="STEELFRAME_REDIS_ALLOW_UNAUTHENTICATED=1"):
        require_authenticated_redis(settings)
    allowed = {"STEELFRAME_REDIS_URL": REMOTE, "STEELFRAME_REDIS_ALLOW_UNAUTHENTICATED": "1"}
    require_authenticated_redis(Settings.from_env(allowed))


@pytest.mark.parametrize("command", [["worker"], ["serve", "--port", "0"]])
def test_worker_and_serve_refuse_an_unauthenticated_remote_redis(
    tmp_path: Path, command: list[str]
) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("STEELFRAME_")}
    env |= {"STEELFRAME_REDIS_URL": REMOTE, "STEELFRAME_DATA_DIR": str(tmp_path / "var")}
    result = subprocess.run(
        [sys.executable, "-m", "steelframe.cli", *command],
        env=env,
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 2, result.stderr
    [line] = result.stderr.splitlines()
    assert line.startswith("steelframe: configuration error: STEELFRAME_REDIS_URL: Redis at")
    assert "192.0.2.10 has no password" in line
    assert not (tmp_path / "var" / "steelframe.db").exists()  # refused before opening anything
