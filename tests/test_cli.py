"""The steelframe command: operator tokens, db upgrade, config, and dev start-up."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import urllib.request
from pathlib import Path

from steelframe.cli import main


def _env(tmp_path: Path) -> dict[str, str]:
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(
            ("STEELFRAME_", "APP_ID", "PRIVATE_KEY", "WEBHOOK_SECRET", "GITHUB_API_URL")
        )
    }
    env["STEELFRAME_DATABASE_URL"] = f"sqlite:///{tmp_path / 'cli.db'}"
    return env


def test_operator_create_prints_the_token_last(
    tmp_path: Path, capsys: object, monkeypatch: object
) -> None:
    import pytest

    mp: pytest.MonkeyPatch = monkeypatch  # type: ignore[assignment]
    mp.setenv("STEELFRAME_DATABASE_URL", f"sqlite:///{tmp_path / 'cli.db'}")
    assert main(["operator", "create", "alice"]) == 0
    out = capsys.readouterr().out.strip().splitlines()  # type: ignore[attr-defined]
    assert re.fullmatch(r"sfo_[\w-]{20,}", out[-1])
    assert main(["operator", "create", "alice"]) == 1  # already exists


def test_bad_setting_stops_with_a_message_naming_it(tmp_path: Path) -> None:
    env = _env(tmp_path) | {"STEELFRAME_RUNTIME": "nonsense"}
    result = subprocess.run(
        [sys.executable, "-m", "steelframe.cli", "db", "upgrade"],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 2
    assert "STEELFRAME_RUNTIME" in result.stderr and "Traceback" not in result.stderr


def test_dev_prints_url_and_token_that_work(tmp_path: Path) -> None:
    env = _env(tmp_path)
    del env["STEELFRAME_DATABASE_URL"]  # dev's embedded default: a SQLite file under ./var
    process = subprocess.Popen(
        [sys.executable, "-m", "steelframe.cli", "dev", "--port", "0"],
        cwd=tmp_path,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        url = token = None
        assert process.stdout is not None
        for line in process.stdout:
            if line.startswith("url: "):
                url = line.split(" ", 1)[1].strip()
            if line.startswith("token: "):
                token = line.split(" ", 1)[1].strip()
                break
        assert url and token
        answer = _post_json(f"{url}/api/operator/chat", {"message": "hi"}, token)
        assert "No model is configured" in answer["reply"]
        with urllib.request.urlopen(f"{url}/healthz", timeout=10) as response:
            assert json.load(response)["database"] is True
    finally:
        process.terminate()
        process.wait(timeout=20)
    assert (tmp_path / "var" / "steelframe.db").exists()


def _post_json(url: str, body: dict[str, object], token: str) -> dict[str, object]:
    request = urllib.request.Request(
        url,
        data=json.dumps(body).encode(),
        headers={"Authorization": f"Bearer {token}", "Content-Type": "application/json"},
    )
    with urllib.request.urlopen(request, timeout=30) as response:
        return dict(json.load(response))
