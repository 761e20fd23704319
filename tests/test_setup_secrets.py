"""Setup-only secrets: read per repository from the operator's folder, never the worker's
own, and found wherever setup leaves them; and a setup command's process in the sandbox."""

from __future__ import annotations

import asyncio
import os
from pathlib import Path

import pytest

from bot.lifecycle.redact import Redactor
from bot.lifecycle.sandbox import SandboxPolicy, SandboxRun
from bot.lifecycle.setup_process import run_command
from bot.lifecycle.setup_secrets import CHUNK, SetupSecretError, files_holding, load
from tests.fakes.sandbox import require_bwrap

TOKEN = "npm_0123456789abcdef"


def _store(tmp_path: Path, repo: str, text: str) -> Path:
    owner, name = repo.split("/")
    (tmp_path / owner).mkdir(parents=True, exist_ok=True)
    (tmp_path / owner / f"{name}.env").write_text(text)
    return tmp_path


def test_the_named_secrets_of_the_repository_are_read(tmp_path: Path) -> None:
    folder = _store(tmp_path, "acme/web", f"NPM_TOKEN={TOKEN}\nOTHER=not-asked-for-x\n")
    _store(tmp_path, "acme/api", "NPM_TOKEN=api-token-9876543210\n")
    got = load(folder, "acme/web", ("NPM_TOKEN",), worker_secrets=Redactor())
    assert got == {"NPM_TOKEN": TOKEN}
    assert load(folder, "acme/web", (), worker_secrets=Redactor()) == {}


@pytest.mark.parametrize(
    ("repo", "names", "worker", "said"),
    [
        ("acme/web", ("MISSING",), (), "MISSING is not configured"),
        ("acme/none", ("NPM_TOKEN",), (), "NPM_TOKEN is not configured"),
        ("acme/web", ("SHORT",), (), "too short"),
        ("acme/web", ("NPM_TOKEN",), (TOKEN,), "one of the worker's own secrets"),
        ("../etc", ("NPM_TOKEN",), (), "not available for this repository name"),
    ],
)
def test_a_secret_that_cannot_be_given_fails_with_one_line(
    tmp_path: Path, repo: str, names: tuple[str, ...], worker: tuple[str, ...], said: str
) -> None:
    folder = _store(tmp_path, "acme/web", f"NPM_TOKEN={TOKEN}\nSHORT=abc\n")
    with pytest.raises(SetupSecretError) as caught:
        load(folder, repo, names, worker_secrets=Redactor(worker))
    assert said in caught.value.public and TOKEN not in caught.value.public


def test_no_secrets_folder_fails_a_config_that_names_secrets() -> None:
    with pytest.raises(SetupSecretError, match="STEELFRAME_SETUP_SECRETS_DIR"):
        load(None, "acme/web", ("NPM_TOKEN",), worker_secrets=Redactor())


def test_a_secret_is_found_in_contents_names_and_link_targets(tmp_path: Path) -> None:
    (tmp_path / "node_modules" / "a").mkdir(parents=True)
    (tmp_path / "node_modules" / "a" / "clean.js").write_text("nothing here")
    # Split across two reads: still found.
    (tmp_path / "node_modules" / "a" / "big.bin").write_bytes(
        b"x" * (CHUNK - 5) + TOKEN.encode() + b"y"
    )
    (tmp_path / f"cache-{TOKEN}").write_text("")
    os.symlink(f"/registry/{TOKEN}", tmp_path / "link")
    (tmp_path / "fine").write_text("fine")
    found = files_holding(
        tmp_path, ["node_modules", f"cache-{TOKEN}", "link", "fine"], {"T": TOKEN}
    )
    assert sorted(found) == sorted(["node_modules/a/big.bin", f"cache-{TOKEN}", "link"])


async def test_a_setup_command_past_its_time_is_killed_with_what_it_started(
    tmp_path: Path,
) -> None:
    require_bwrap()
    place = SandboxRun(repo=tmp_path / "repo", tmp=tmp_path / "tmp", prompt=tmp_path / "p.md")
    place.repo.mkdir()
    started = asyncio.get_running_loop().time()
    result = await run_command(
        SandboxPolicy(), place, "echo started; sleep 60 & sleep 60", {}, time_limit=1.0
    )
    assert result.timed_out and result.exit_code is None and not result.passed
    assert "started" in result.tail
    assert asyncio.get_running_loop().time() - started < 15


async def test_a_setup_command_stops_when_the_run_is_stopped(tmp_path: Path) -> None:
    require_bwrap()
    place = SandboxRun(repo=tmp_path / "repo", tmp=tmp_path / "tmp", prompt=tmp_path / "p.md")
    place.repo.mkdir()
    stop = asyncio.Event()
    asyncio.get_running_loop().call_later(0.5, stop.set)
    result = await run_command(SandboxPolicy(), place, "sleep 60", {}, time_limit=60, stop=stop)
    assert result.stopped and not result.timed_out and result.exit_code is None


async def test_a_setup_command_gets_its_environment_and_reports_its_exit(tmp_path: Path) -> None:
    require_bwrap()
    place = SandboxRun(repo=tmp_path / "repo", tmp=tmp_path / "tmp", prompt=tmp_path / "p.md")
    place.repo.mkdir()
    result = await run_command(
        SandboxPolicy(),
        place,
        'echo "v=$SETUP_VALUE"; exit 4',
        {"SETUP_VALUE": "x1"},
        time_limit=30,
    )
    assert result.exit_code == 4 and "v=x1" in result.tail
