"""`steelframe config` while `steelframe dev` runs (`make run`, then `config` in another
terminal): it says whose settings it shows and names the running dev; `config --dev` shows
the settings dev runs on, the ones dev itself reports at start."""

from __future__ import annotations

import subprocess
from pathlib import Path

from tests.fakes.dev_process import (
    dev_up_to_its_token,
    production_shell,
    steelframe_cli,
    unconfigured_shell,
)


def _config(cwd: Path, env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    result = steelframe_cli(cwd, env, "config", *args)
    assert result.returncode == 0, result.stderr
    return result


def _table(listed: str) -> dict[str, list[str]]:
    """`config --list`'s rows by variable: its value and source, cut at the header's columns."""
    header, *lines = listed.splitlines()
    value, source, default = (header.index(name) for name in ("VALUE", "SOURCE", "DEFAULT"))
    return {
        line.split()[0]: [line[value:source].strip(), line[source:default].strip()]
        for line in lines
    }


def test_config_names_a_running_dev_and_config_dev_shows_what_it_runs_on(
    tmp_path: Path, redis_url: str
) -> None:
    env = production_shell(tmp_path, redis_url)
    with dev_up_to_its_token(tmp_path, env) as dev:
        serve = _config(tmp_path, env)
        dev_view = _config(tmp_path, env, "--dev", "--list")
    folder = tmp_path / "var"
    [url] = [line.removeprefix("url: ").strip() for line in dev.said if line.startswith("url: ")]
    # serve's view, said to be serve's, and the dev running here named, with its URL and the
    # way to its settings.
    assert f"STEELFRAME_DATABASE_URL=sqlite:///{tmp_path / 'production.db'}" in serve.stdout
    assert serve.stderr.splitlines() == [
        "steelframe config: the settings of serve, worker and the other commands (dev's: "
        "config --dev)",
        f"steelframe config: a steelframe dev (pid {dev.pid}) runs on the data folder "
        f"{folder} at {url}, on settings of its own, not these: `steelframe config --dev` "
        "shows them",
    ]
    # dev's view: what dev said it runs on, and the services it started itself.
    rows = _table(dev_view.stdout)
    database = f"sqlite:///{folder / 'steelframe.db'}"
    assert f"database: {database}" in "".join(dev.said)
    assert rows["STEELFRAME_DATABASE_URL"] == [database, "steelframe dev"]
    assert rows["STEELFRAME_DATA_DIR"] == [str(folder), "steelframe dev"]
    assert rows["STEELFRAME_REDIS_URL"] == [
        f"(an embedded Redis in {folder / 'redis'})",
        "steelframe dev",
    ]
    sandbox = f"(the local GitHub sandbox in {folder / 'github-sandbox'})"
    assert rows["APP_ID"] == [sandbox, "steelframe dev"]
    assert rows["STEELFRAME_CODING_AGENT"] == ["demo", "steelframe dev"]
    runtime = rows["STEELFRAME_RUNTIME"][0]
    assert f"runtime: {runtime} " in "".join(dev.said)
    assert dev_view.stderr.splitlines() == [
        f"steelframe config: the settings steelframe dev runs on (the one running on {folder} "
        f"is pid {dev.pid}, at {url})",
        "steelframe config: dev does not use STEELFRAME_DATA_DIR, STEELFRAME_DATABASE_URL, "
        "STEELFRAME_REDIS_URL of this shell: it keeps its own (--use-configured-services uses "
        "them)",
    ]
    # dev stopped: no running dev named, by either view.
    assert "runs on the data folder" not in _config(tmp_path, env).stderr
    assert f"(none runs on {folder} now)" in _config(tmp_path, env, "--dev").stderr


def test_config_dev_with_configured_services_and_a_data_dir_of_its_own(
    tmp_path: Path, redis_url: str
) -> None:
    env = production_shell(tmp_path, redis_url)
    shown = _config(tmp_path, env, "--dev", "--use-configured-services").stdout.splitlines()
    assert f"STEELFRAME_REDIS_URL={redis_url}" in shown
    assert f"STEELFRAME_DATA_DIR={tmp_path / 'production-data'}" in shown
    shown = _config(tmp_path, env, "--dev", "--data-dir", "elsewhere").stdout.splitlines()
    assert f"STEELFRAME_DATA_DIR={tmp_path / 'elsewhere'}" in shown
    # Looking made nothing: no data folder, no lock file.
    assert sorted(path.name for path in tmp_path.iterdir()) == []


def test_config_refuses_dev_options_without_dev(tmp_path: Path) -> None:
    result = steelframe_cli(tmp_path, unconfigured_shell(), "config", "--data-dir", "x")
    assert result.returncode == 2 and result.stdout == ""
    assert result.stderr == (
        "steelframe config: --data-dir and --use-configured-services go with --dev\n"
    )
