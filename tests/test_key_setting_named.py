"""A refused App key is named by the setting it came from: an operator who set
PRIVATE_KEY_PATH to a file that holds no key is told PRIVATE_KEY_PATH, by `serve` at start,
by `worker` and by `doctor` alike (serve and worker once said PRIVATE_KEY)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from bot.config_values import ConfigError, Secret
from bot.github.client import GitHubClient
from tests.conftest import make_settings
from tests.fakes.workers import CREDENTIAL_VARS

# PEM markers around no key: passes the settings' PEM test, refused by the signer.
JUNK = "-----BEGIN RSA PRIVATE KEY-----\nbm90IGEga2V5\n-----END RSA PRIVATE KEY-----\n"
STEELFRAME = [sys.executable, "-m", "steelframe.cli"]


def test_the_client_names_the_setting_the_key_came_from(tmp_path: Path) -> None:
    (tmp_path / "key.pem").write_text(JUNK)
    (tmp_path / "file").mkdir()
    from_file = make_settings(tmp_path / "file", app_id=7, private_key_path=tmp_path / "key.pem")
    with pytest.raises(ConfigError) as caught:
        GitHubClient.from_settings(from_file)
    assert str(caught.value) == "PRIVATE_KEY_PATH: not a PEM-encoded private key"
    (tmp_path / "inline").mkdir()
    inline = make_settings(tmp_path / "inline", app_id=7, private_key=Secret(JUNK))
    with pytest.raises(ConfigError) as caught:
        GitHubClient.from_settings(inline)
    assert str(caught.value) == "PRIVATE_KEY: not a PEM-encoded private key"


def _run(tmp_path: Path, *args: str, **settings: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(CREDENTIAL_VARS)}
    env |= {
        "STEELFRAME_DATA_DIR": str(tmp_path / "var"),
        "STEELFRAME_DATABASE_URL": f"sqlite:///{tmp_path / 'db.sqlite'}",
        "APP_ID": "7",
        "PRIVATE_KEY_PATH": str(tmp_path / "key.pem"),
        "WEBHOOK_SECRET": "s",
        **settings,
    }
    return subprocess.run(
        [*STEELFRAME, *args], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120
    )


def _key_lines(text: str) -> list[str]:
    return [line for line in text.splitlines() if "not a PEM-encoded private key" in line]


@pytest.mark.slow
def test_serve_worker_and_doctor_name_private_key_path(tmp_path: Path, redis_url: str) -> None:
    (tmp_path / "key.pem").write_text(JUNK)
    served = _run(tmp_path, "serve", "--port", "0")
    assert served.returncode == 2, served.stderr
    said = _key_lines(served.stderr)
    assert said and all("PRIVATE_KEY_PATH: not a PEM" in line for line in said), served.stderr
    assert "configuration error: PRIVATE_KEY_PATH: not a PEM" in served.stderr

    worked = _run(tmp_path, "worker", "--burst", STEELFRAME_REDIS_URL=redis_url)
    said = _key_lines(worked.stderr)
    assert said and all("PRIVATE_KEY_PATH: not a PEM" in line for line in said), worked.stderr
    assert "configuration error: PRIVATE_KEY_PATH: not a PEM" in worked.stderr

    doctor = _run(tmp_path, "doctor", STEELFRAME_REDIS_URL=redis_url)
    [line] = [line for line in doctor.stdout.splitlines() if " github_app " in line]
    assert line.startswith("FAIL") and "PRIVATE_KEY_PATH: not a PEM" in line, doctor.stdout
