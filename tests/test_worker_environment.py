"""A worker reads its environment once, when it starts (`build_worker_context(environ=...)`),
and its jobs use that snapshot: the repository's setup is refused a secret that is one of
the worker's own key variables even where the job's process environment does not hold it,
and a setup or test command gets PATH and the locale from it. setup_run once read
`os.environ` again on every job."""

from __future__ import annotations

import os
import secrets
from pathlib import Path

import pytest
import redis

from bot.db import Database
from bot.lifecycle import setup_run
from bot.lifecycle.repo_config import parse
from bot.lifecycle.sandbox import SandboxPolicy, SandboxRun
from bot.lifecycle.setup_process import run_command
from steelframe.worker_context import build_worker_context
from tests.conftest import make_settings
from tests.fakes.sandbox import require_bwrap

KEY_VARIABLE = "ACME_MODEL_KEY"


def test_setup_is_refused_a_key_from_the_environment_the_worker_started_with(
    tmp_path: Path, redis_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    key = "sk-acme-" + secrets.token_hex(16)
    store = tmp_path / "setup-secrets"
    (store / "acme").mkdir(parents=True)
    (store / "acme" / "web.env").write_text(f"NPM_TOKEN={key}\n")
    settings = make_settings(
        tmp_path, coding_env_passthrough=(KEY_VARIABLE,), setup_secrets_dir=store
    )
    database = Database.from_url(settings.database_url)
    connection = redis.Redis.from_url(redis_url)
    monkeypatch.delenv(KEY_VARIABLE, raising=False)
    try:
        ctx = build_worker_context(
            settings,
            environ={KEY_VARIABLE: key},
            db=database,
            connection=connection,
            memory=False,
        )
        # The job's own process environment (here: without the key) is not asked.
        config = parse("setup:\n  - npm ci\nsetup_secrets: [NPM_TOKEN]\n")
        with pytest.raises(setup_run.SetupRefused) as refused:
            setup_run.load_secrets(ctx, "acme/web", config)
        assert "one of the worker's own secrets" in refused.value.public
        assert key not in refused.value.public
    finally:
        connection.close()
        database.dispose()


async def test_a_setup_command_gets_the_locale_the_worker_started_with(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    require_bwrap()
    started_with = {"PATH": os.environ["PATH"], "LANG": "C.UTF-8"}
    monkeypatch.setenv("LANG", "xx_JOB.TIME")  # the job's process environment: not asked
    place = SandboxRun(repo=tmp_path / "repo", tmp=tmp_path / "tmp", prompt=tmp_path / "p.md")
    place.repo.mkdir()
    result = await run_command(
        SandboxPolicy(), place, 'echo "lang=$LANG"', {}, time_limit=30, base_env=started_with
    )
    assert result.passed and "lang=C.UTF-8" in result.tail, result.tail
