"""The smaller traps of issue 33: `operator list` and `revoke`, and an SQLite folder that
cannot be made, said in one line instead of a traceback."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from sqlalchemy import create_engine, func, select
from sqlalchemy.orm import Session

from bot.errors import Unauthorized
from bot.models import WebSession
from bot.operators import authenticate
from bot.web_sessions import sign_in
from steelframe.cli import main
from tests.fakes.ports import refused_port


def test_operators_are_listed_and_a_token_revoked(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    url = f"sqlite:///{tmp_path / 'cli.db'}"
    monkeypatch.setenv("STEELFRAME_DATABASE_URL", url)
    tokens = {}
    for name in ("alice", "bob"):
        assert main(["operator", "create", name]) == 0
        tokens[name] = capsys.readouterr().out.strip().splitlines()[-1]
    assert main(["operator", "list"]) == 0
    listed = capsys.readouterr().out
    assert [line.split()[0] for line in listed.splitlines()] == ["alice", "bob"]
    assert "sfo_" not in listed  # names, never tokens
    engine = create_engine(url)
    with Session(engine) as session, session.begin():
        sign_in(session, tokens["alice"])  # a browser signed in with the token
    assert main(["operator", "revoke", "alice"]) == 0
    assert "revoked 'alice'" in capsys.readouterr().out
    with Session(engine) as session:
        with pytest.raises(Unauthorized):
            authenticate(session, tokens["alice"])
        assert authenticate(session, tokens["bob"]).name == "bob"
        assert session.scalar(select(func.count()).select_from(WebSession)) == 0
    engine.dispose()
    assert main(["operator", "revoke", "carol"]) == 1
    assert "no operator named 'carol'" in capsys.readouterr().err
    # The list says whose token is revoked, until `rotate` gives it a new one.
    assert main(["operator", "list"]) == 0
    alice, bob = capsys.readouterr().out.splitlines()
    assert " revoked 20" in alice and "revoked" not in bob
    assert main(["operator", "rotate", "alice"]) == 0
    capsys.readouterr()
    assert main(["operator", "list"]) == 0
    assert "revoked" not in capsys.readouterr().out


def test_an_sqlite_folder_that_cannot_be_made_is_one_line(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("STEELFRAME_")}
    env["STEELFRAME_DATABASE_URL"] = "sqlite:////proc/steelframe-nowhere/x.db"
    result = subprocess.run(
        [sys.executable, "-m", "steelframe.cli", "db", "upgrade"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 1
    assert result.stderr.strip() == (
        "steelframe: cannot make the folder /proc/steelframe-nowhere for the SQLite database "
        "sqlite:////proc/steelframe-nowhere/x.db: No such file or directory. Check "
        "STEELFRAME_DATABASE_URL (or STEELFRAME_DATA_DIR, where the default database lives)."
    )


def test_github_check_without_an_answer_does_not_say_github_said(
    tmp_path: Path, github_app_keys: tuple[str, str]
) -> None:
    key = tmp_path / "app.pem"
    key.write_text(github_app_keys[0])
    closed = f"http://127.0.0.1:{refused_port()}"  # nothing listens there
    env = {k: v for k, v in os.environ.items() if not k.startswith("STEELFRAME_")}
    env.update(APP_ID="1", PRIVATE_KEY_PATH=str(key), GITHUB_API_URL=closed)
    env["STEELFRAME_DATABASE_URL"] = f"sqlite:///{tmp_path / 'x.db'}"
    result = subprocess.run(
        [sys.executable, "-m", "steelframe.cli", "github", "check", "--repo", "o/r"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 1
    last = result.stderr.strip().splitlines()[-1]
    assert last.startswith(f"steelframe: no answer from {closed}: GitHub did not answer GET /app")
    assert "GitHub said" not in result.stderr


@pytest.mark.slow
async def test_webhooks_sign_prints_a_curl_the_service_accepts(tmp_path: Path) -> None:
    import asyncio
    import json

    from tests.fakes.serve_process import serve

    payload = tmp_path / "ping.json"
    payload.write_text('{"zen": "Keep it logically awesome.", "hook_id": 1}')
    settings = {"STEELFRAME_DATA_DIR": str(tmp_path / "var"), "WEBHOOK_SECRET": "s3cret"}

    def signed(secret: str, url: str) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if not k.startswith("STEELFRAME_")}
        env["STEELFRAME_DATABASE_URL"] = f"sqlite:///{tmp_path / 'cli.db'}"
        sign = [sys.executable, "-m", "steelframe.cli", "webhooks", "sign", "--event", "ping"]
        printed = subprocess.run(
            [*sign, "--url", url, "--secret", secret, str(payload)],
            env=env, capture_output=True, text=True, check=True, timeout=60,
        ).stdout  # fmt: skip
        sent = subprocess.run(["bash", "-c", printed], capture_output=True, text=True, timeout=60)
        answer: dict[str, str] = json.loads(sent.stdout)
        return answer

    async with serve(settings, tmp_path, tmp_path / "serve.log") as served:
        accepted = await asyncio.to_thread(signed, "s3cret", served.url)
        refused = await asyncio.to_thread(signed, "wrong", served.url)
    assert accepted["status"] == "accepted"
    assert refused["code"] == "unauthorized"  # a wrong secret is refused, not stored


def test_an_empty_variable_unsets_what_env_file_says() -> None:
    from bot.config import Settings

    dotenv = {"WEBHOOK_SECRET": "abc", "APP_ID": "5", "STEELFRAME_CODING_AGENT": "claude"}
    emptied = Settings.from_env(
        {"WEBHOOK_SECRET": "", "APP_ID": "", "STEELFRAME_CODING_AGENT": ""}, dotenv=dotenv
    )
    assert (emptied.webhook_secret, emptied.app_id, emptied.coding_agent) == (None, None, None)
    assert emptied.sources["app_id"] == "environment (empty: unset)"
    kept = Settings.from_env({}, dotenv=dotenv)
    assert kept.app_id == 5 and kept.coding_agent == "claude"
    with pytest.raises(Exception, match="STEELFRAME_NOPE: unknown setting"):
        Settings.from_env({"STEELFRAME_NOPE": ""})  # an unknown name is still refused


@pytest.mark.parametrize("command", ["serve", "dev"])
def test_a_taken_port_fails_before_any_start_up_work(tmp_path: Path, command: str) -> None:
    import socket

    env = {k: v for k, v in os.environ.items() if not k.startswith("STEELFRAME_")}
    with socket.create_server(("127.0.0.1", 0)) as taken:
        port = taken.getsockname()[1]
        result = subprocess.run(
            [sys.executable, "-X", "importtime", "-m", "steelframe.cli", command, "--port",
             str(port)],
            cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120,
        )  # fmt: skip
    assert result.returncode == 1
    imported = [line.rsplit("|", 1)[-1].strip() for line in result.stderr.splitlines()]
    # Seconds on a busy machine (the app, every shell, the memory analysis and its
    # scikit-learn) that a taken port no longer waits for.
    for heavy in ("steelframe.server", "steelframe.parts", "memory.analysis", "sklearn"):
        assert heavy not in imported, heavy
    said = [line for line in result.stderr.splitlines() if not line.startswith("import time:")]
    assert "\n".join(said).strip() == (
        f"steelframe: cannot listen on 127.0.0.1:{port}: the port is already in use. "
        "Stop the other process or choose another port with --port (make run PORT=9000)."
    )
    assert not (tmp_path / "var").exists()  # no database, index, Redis or sandbox made first


def test_a_decision_names_the_operator_who_published_it_outside_its_text() -> None:
    from bot.decisions import DECISION_MARKER, decision_comment, decision_text

    comment = decision_comment("Retry twice.", "k1", by="ada `lovelace`\n")
    assert comment.startswith(DECISION_MARKER) and comment.count("steelframe-decision") == 1
    assert "— published by operator `ada lovelace` via Steelframe" in comment
    assert decision_text(comment) == "Retry twice."  # the runtime is told the Decision only
    assert "published by" not in decision_comment("Retry twice.", "k1")
