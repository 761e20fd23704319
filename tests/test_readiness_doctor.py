"""Readiness tells the truth: /readyz is 503 naming each missing serving setting (webhook
secret, App id and key pair), `serve` warns at start-up, and `steelframe doctor` checks the
whole configuration, exits 0 on a dev shell and 1 on a broken App, and warns about
secrets git tracks."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from bot.config_values import Secret, UidRange
from bot.serving_checks import SANDBOX_CHECKS, Check, github_app_check, sandbox_checks
from tests.conftest import GitHubSandbox, make_settings
from tests.fakes.sandbox import require_bwrap, require_root
from tests.fakes.serve_process import child_env, serve

STEELFRAME = [sys.executable, "-m", "steelframe.cli"]


def _settings(folder: Path, **values: Any) -> Any:
    folder.mkdir()
    return make_settings(folder, **values)


async def _readyz(api_factory: Any, settings: Any) -> tuple[int, dict[str, Any]]:
    api = await api_factory(settings)
    answer = await api.raw.get("/readyz")
    return answer.status, await answer.json()


@pytest.mark.slow
async def test_readyz_names_each_missing_serving_setting(
    api_factory: Any, tmp_path: Path, github_sandbox: GitHubSandbox
) -> None:
    app = {
        "app_id": github_sandbox.app_id,
        "private_key": Secret(github_sandbox.private_key),
        "github_api_url": github_sandbox.url,
    }
    # The App without its webhook secret: every delivery would be refused.
    status, body = await _readyz(api_factory, _settings(tmp_path / "a", **app))
    assert status == 503 and body["status"] == "not_ready"
    assert body["checks"]["webhook_secret"] == {
        "ok": False,
        "detail": "WEBHOOK_SECRET missing: every webhook delivery is refused (503)",
    }
    assert body["checks"]["github_app"]["ok"] is True
    # An App id with no key.
    status, body = await _readyz(
        api_factory,
        _settings(tmp_path / "b", app_id=7, webhook_secret=Secret("s")),
    )
    assert status == 503 and "no private key" in body["checks"]["github_app"]["detail"]
    # A secret with no App.
    status, body = await _readyz(api_factory, _settings(tmp_path / "c", webhook_secret=Secret("s")))
    assert status == 503 and "APP_ID" in body["checks"]["github_app"]["detail"]
    # Everything set: ready, and the coding runtime said.
    status, body = await _readyz(
        api_factory, _settings(tmp_path / "d", **app, webhook_secret=Secret("s"))
    )
    assert status == 200, body
    assert body["checks"]["github_app"]["detail"] == (
        f"App {github_sandbox.app_id} at {github_sandbox.url}"
    )
    assert "no coding agent configured" in body["checks"]["coding_runtime"]["detail"]


@pytest.mark.slow
async def test_serve_warns_at_start_up_for_each_missing_setting(
    tmp_path: Path, github_sandbox: GitHubSandbox
) -> None:
    key = tmp_path / "app.pem"
    key.write_text(github_sandbox.private_key)
    settings = {"STEELFRAME_DATA_DIR": str(tmp_path / "data"), "APP_ID": "7"}
    settings.update(PRIVATE_KEY_PATH=str(key), GITHUB_API_URL=github_sandbox.url)
    async with serve(settings, tmp_path, tmp_path / "serve.log") as served:
        pass
    assert (
        "steelframe: warning: not ready: WEBHOOK_SECRET missing: every webhook delivery is "
        "refused (503)" in served.log_text()
    )


def _doctor(cwd: Path, **variables: str) -> subprocess.CompletedProcess[str]:
    env = child_env({"STEELFRAME_DATA_DIR": str(cwd / "var"), **variables})
    return subprocess.run(
        [*STEELFRAME, "doctor"], cwd=cwd, env=env, capture_output=True, text=True, timeout=120
    )


def test_doctor_is_happy_on_a_dev_shell_and_warns_about_tracked_secrets(tmp_path: Path) -> None:
    run = _doctor(tmp_path)
    assert run.returncode == 0, run.stdout + run.stderr
    lines = run.stdout.splitlines()
    for name in (
        "database",
        "redis",
        "github_app",
        "webhook_secret",
        "coding_sandbox",
        "sandbox_uids",
    ):
        assert any(line.split()[1:2] == [name] for line in lines), (name, run.stdout)
    assert any(line.startswith("warn") and " redis " in line for line in lines)
    assert lines[-1] == "ok"
    # A checkout whose .env git tracks: a warning naming it, not a failure.
    (tmp_path / ".env").write_text("LOG_LEVEL=INFO\n")
    subprocess.run(["git", "init", "-q"], cwd=tmp_path, check=True)
    subprocess.run(["git", "add", ".env"], cwd=tmp_path, check=True)
    run = _doctor(tmp_path)
    assert run.returncode == 0
    [secrets] = [line for line in run.stdout.splitlines() if " secrets " in line]
    assert secrets.startswith("warn") and "git tracks .env" in secrets


def test_doctor_says_why_the_database_refused_and_never_its_password(
    tmp_path: Path, postgres_server: str
) -> None:
    """A server that answers but refuses (no such database) is not "unreachable": the line
    gives the server's reason, as `serve` does, with the password masked."""
    from sqlalchemy.engine import make_url

    url = make_url(postgres_server).set(password="hunter2-secret", database="no_such_db_qa")
    run = _doctor(tmp_path, STEELFRAME_DATABASE_URL=url.render_as_string(hide_password=False))
    [line] = [line for line in run.stdout.splitlines() if " database " in line]
    assert line.startswith("FAIL") and run.returncode == 1
    assert 'database "no_such_db_qa" does not exist' in line, line
    assert "STEELFRAME_DATABASE_URL" in line and "hunter2-secret" not in run.stdout + run.stderr


def test_doctor_fails_a_redis_that_serve_and_worker_would_refuse(tmp_path: Path) -> None:
    """An unauthenticated Redis off loopback stops serve and worker at start (bot/
    redis_auth.py): doctor must not call that configuration ok, whether or not it answers."""
    run = _doctor(tmp_path, STEELFRAME_REDIS_URL="redis://redis.invalid:6379/0")
    [line] = [line for line in run.stdout.splitlines() if " redis " in line]
    assert line.startswith("FAIL") and run.returncode == 1
    assert "Redis at redis.invalid has no password" in line, line
    allowed = _doctor(
        tmp_path,
        STEELFRAME_REDIS_URL="redis://redis.invalid:6379/0",
        STEELFRAME_REDIS_ALLOW_UNAUTHENTICATED="1",
    )
    [line] = [line for line in allowed.stdout.splitlines() if " redis " in line]
    assert "no password" not in line  # allowed: only whether it answers is left


@pytest.mark.slow
async def test_doctor_tries_the_app_against_github_and_fails_a_broken_one(
    github_sandbox: GitHubSandbox, tmp_path: Path, github_app_keys: tuple[str, str]
) -> None:
    import asyncio

    key = tmp_path / "app.pem"
    key.write_text(github_app_keys[0])
    app = {
        "APP_ID": str(github_sandbox.app_id),
        "PRIVATE_KEY_PATH": str(key),
        "WEBHOOK_SECRET": "s",
        "GITHUB_API_URL": github_sandbox.url,
    }
    run = await asyncio.to_thread(_doctor, tmp_path, **app)
    assert run.returncode == 0, run.stdout
    [line] = [line for line in run.stdout.splitlines() if " github_app " in line]
    assert line.startswith("ok") and f"(id {github_sandbox.app_id}) at {github_sandbox.url}" in line
    # Another App's id with this key: GitHub refuses the JWT, and doctor says so.
    run = await asyncio.to_thread(_doctor, tmp_path, **{**app, "APP_ID": "999"})
    assert run.returncode == 1
    [line] = [line for line in run.stdout.splitlines() if " github_app " in line]
    assert line.startswith("FAIL") and github_sandbox.url in line
    # A file with the PEM markers around no key: a FAIL line naming it, and the rest of
    # the report still printed (doctor once stopped there, exit 2, on the signer's error).
    key.write_text("-----BEGIN PRIVATE KEY-----\nnot a key\n-----END PRIVATE KEY-----\n")
    run = await asyncio.to_thread(_doctor, tmp_path, **app)
    [line] = [line for line in run.stdout.splitlines() if " github_app " in line]
    assert line.startswith("FAIL") and "not a PEM-encoded private key" in line, run.stdout
    assert run.returncode == 1 and run.stdout.splitlines()[-1].startswith("FAIL")
    assert any(" webhook_secret " in line for line in run.stdout.splitlines())
    # The App's id with no key at all: the setting is named, GitHub is not asked.
    run = await asyncio.to_thread(_doctor, tmp_path, APP_ID="5", GITHUB_API_URL=github_sandbox.url)
    assert run.returncode == 1 and "no private key: set PRIVATE_KEY_PATH" in run.stdout


async def test_a_sandbox_check_added_to_the_list_reaches_readyz(
    api_factory: Any, tmp_path: Path
) -> None:
    settings = make_settings(tmp_path)
    names = [check.name for check in sandbox_checks(settings)]
    assert names == ["coding_sandbox", "coding_egress", "setup_cache", "run_limits", "sandbox_uids"]
    SANDBOX_CHECKS.append(lambda s: [Check("egress", False, "the egress proxy is down")])
    try:
        status, body = await _readyz(api_factory, settings)
    finally:
        SANDBOX_CHECKS.pop()
    assert status == 503
    assert body["checks"]["egress"] == {"ok": False, "detail": "the egress proxy is down"}


async def test_readyz_says_the_coding_runs_network_is_closed_and_where_setup_is_cached(
    api_factory: Any, tmp_path: Path
) -> None:
    """The egress probe starts a real sandbox: a disallowed connection refused, the
    relay up. A setup cache folder that cannot be written is said, never hidden."""
    require_bwrap()
    settings = make_settings(tmp_path)
    status, body = await _readyz(api_factory, settings)
    assert status == 200
    assert body["checks"]["coding_egress"] == {
        "ok": True,
        "detail": "each run's network is closed but for its proxy",
    }
    assert body["checks"]["setup_cache"]["detail"].startswith(str(tmp_path))
    blocked = tmp_path / "not-a-folder"
    blocked.write_text("a file where the data folder should be\n")
    found = {c.name: c for c in sandbox_checks(make_settings(tmp_path, data_dir=blocked))}
    assert found["setup_cache"].note and "not writable" in found["setup_cache"].detail


async def test_readyz_says_whether_runs_get_a_uid_of_their_own_or_why_they_are_nobody(
    api_factory: Any, tmp_path: Path
) -> None:
    """A root worker's runs each get a uid of STEELFRAME_SANDBOX_UID_RANGE; with the range
    off (or unusable here: tests/test_sandbox_uid.py) every run is nobody, said as a warning;
    without the sandbox, or as a user, the range does not apply."""
    require_root()
    settings = make_settings(tmp_path, sandbox_uid_range=UidRange(60600, 60999))
    status, body = await _readyz(api_factory, settings)
    assert status == 200
    assert body["checks"]["sandbox_uids"] == {
        "ok": True,
        "detail": "each run a uid of its own from STEELFRAME_SANDBOX_UID_RANGE=60600-60999 "
        "(400 uids; runs beyond that many at once are nobody)",
    }

    def uids_check(**values: Any) -> Check:
        found = {c.name: c for c in sandbox_checks(make_settings(tmp_path, **values))}
        return found["sandbox_uids"]

    off = uids_check(sandbox_uid_range=None)
    assert off.ok and off.note
    assert off.detail == "every run is nobody (65534), shared: STEELFRAME_SANDBOX_UID_RANGE=off"
    unsandboxed = uids_check(coding_sandbox="off")
    assert unsandboxed.detail == "not used: the sandbox is off" and not unsandboxed.note


def test_a_worker_that_is_not_root_says_the_uid_range_does_not_apply(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The check in a worker process that is not root: each run is its uid, in a user
    namespace of its own. (Its euid is set for the check alone: a process really made nobody
    could not read a checkout in a private folder, as CI's clean clone is.)"""
    monkeypatch.setattr("bot.serving_checks.os.geteuid", lambda: 65534)
    found = sandbox_checks(make_settings(tmp_path))
    said = next(c.detail for c in found if c.name == "sandbox_uids")
    assert said == (
        "each run is the worker's uid in a user namespace of its own (the worker is not root: "
        "STEELFRAME_SANDBOX_UID_RANGE does not apply)"
    )


def test_text_between_pem_markers_that_is_no_key_is_not_ready(tmp_path: Path) -> None:
    """doctor and /readyz passed any text between PEM markers; serve refused it at start."""
    junk = "-----BEGIN RSA PRIVATE KEY-----\nbm90IGEga2V5\n-----END RSA PRIVATE KEY-----\n"
    inline = _settings(tmp_path / "inline", app_id=7, private_key=Secret(junk))
    check = github_app_check(inline)
    assert check.ok is False and check.detail == "PRIVATE_KEY: not a PEM-encoded private key"
    (tmp_path / "key.pem").write_text(junk)
    in_file = _settings(tmp_path / "file", app_id=7, private_key_path=tmp_path / "key.pem")
    assert github_app_check(in_file).detail.startswith("PRIVATE_KEY_PATH: ")
