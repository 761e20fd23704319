"""The steelframe command: operator tokens, db upgrade, config, and dev start-up."""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from steelframe.cli import COMMANDS, Handler, build_parser, main
from tests.fakes.dev_process import popen_dev
from tests.fakes.make_plan import planned_command
from tests.fakes.patience import PATIENCE_SECONDS


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
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("STEELFRAME_DATABASE_URL", f"sqlite:///{tmp_path / 'cli.db'}")
    assert main(["operator", "create", "alice"]) == 0
    out = capsys.readouterr().out.strip().splitlines()
    assert re.fullmatch(r"sfo_[\w-]{20,}", out[-1])
    assert main(["operator", "create", "alice"]) == 1  # already exists: the way on is said
    assert capsys.readouterr().err == (
        "steelframe: operator 'alice' already exists: `steelframe operator rotate alice` "
        "issues it a new token\n"
    )


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
    process = popen_dev(tmp_path, env)
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
        with urllib.request.urlopen(f"{url}/healthz", timeout=PATIENCE_SECONDS) as response:
            assert json.load(response)["database"] is True
    finally:
        process.terminate()
        process.wait(timeout=PATIENCE_SECONDS)
    assert (tmp_path / "var" / "steelframe.db").exists()


def _post_json(url: str, body: dict[str, object], token: str) -> dict[str, object]:
    request = urllib.request.Request(
        url,
        data=json.dumps(body).encode(),
        headers={"Authorization": f"Bearer {token}", "Content-Type": "application/json"},
    )
    with urllib.request.urlopen(request, timeout=PATIENCE_SECONDS) as response:
        return dict(json.load(response))


def _every_parser(parser: argparse.ArgumentParser) -> Iterator[argparse.ArgumentParser]:
    yield parser
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for child in dict.fromkeys(action.choices.values()):
                yield from _every_parser(child)


@pytest.mark.parametrize("command", sorted(COMMANDS))
def test_every_command_and_option_has_help(command: str) -> None:
    parser = build_parser([command])
    [top] = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    for sub in _every_parser(top.choices[command]):
        assert sub.description, f"{sub.prog} has no description"
        for action in sub._actions:
            if isinstance(action, argparse._HelpAction | argparse._SubParsersAction):
                continue
            assert action.help, f"{sub.prog} {action.dest} has no help"


@pytest.mark.parametrize("command", sorted(COMMANDS))
def test_every_commands_handler_names_a_function_that_is_there(command: str) -> None:
    # A Handler is a module and a name, imported only once its command runs (so `--help`
    # imports none of them): a misspelt one would fail only then, in front of the operator.
    parser = build_parser([command])
    [top] = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    handlers = [sub.get_default("handler") for sub in _every_parser(top.choices[command])]
    assert any(handlers), f"{command} runs nothing"
    for handler in filter(None, handlers):
        loaded = handler.load() if isinstance(handler, Handler) else handler
        assert callable(loaded), handler


@pytest.mark.parametrize("command", sorted(COMMANDS))
def test_no_option_says_its_default_twice(command: str) -> None:
    # The formatter appends "(default: X)"; a help that already says its default read
    # "note (default) (default: note)", and a repeatable option "(default: [])".
    parser = build_parser([command])
    [top] = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    for sub in _every_parser(top.choices[command]):
        formatter = sub._get_formatter()
        for action in sub._actions:
            said = formatter._get_help_string(action) or ""  # type: ignore[attr-defined]
            said = said.replace("%(default)s", str(action.default))
            assert said.count("(default") <= 1, f"{sub.prog} {action.dest}: {said}"
            assert "(default: [])" not in said, f"{sub.prog} {action.dest}: {said}"


@pytest.mark.parametrize("command", ["worker", "reconcile"])
def test_a_queue_option_is_held_to_the_queue_settings_rule(
    command: str, capsys: pytest.CaptureFixture[str]
) -> None:
    # STEELFRAME_TASK_QUEUE refuses such a name; --queue, which overrides it, took it and
    # listened on a queue nothing enqueues on.
    with pytest.raises(SystemExit) as stopped:
        main([command, "--queue", "bad name!*"])
    assert stopped.value.code == 2
    assert "--queue: 'bad name!*' is not valid: must be 1-100 letters" in capsys.readouterr().err


def test_version_and_help_import_no_command_module() -> None:
    probe = (
        "import sys; from steelframe.cli import main\n"
        "for argv in (['--version'], ['--help']):\n"
        "    try: main(argv)\n"
        "    except SystemExit: pass\n"
        "heavy = {'sklearn', 'sqlalchemy', 'aiohttp', 'textual', 'rq', 'bot.db'}\n"
        "print(sorted(heavy & set(sys.modules)))\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, timeout=60, check=True
    )
    assert result.stdout.strip().splitlines()[-1] == "[]"
    assert "serve" in result.stdout and "steelframe 0.1.0" in result.stdout


@pytest.mark.parametrize(
    "argv",
    [
        ["serve", "--help"],
        ["worker", "--help"],
        ["reconcile", "--help"],
        ["db", "upgrade", "--help"],
        ["operator", "create", "--help"],
        ["config", "--help"],
        ["dev", "--help"],
        ["github", "register", "--help"],
        ["webhooks", "list", "--help"],
        ["memory", "search", "--help"],
    ],
)
def test_a_commands_help_imports_none_of_its_work(argv: list[str]) -> None:
    # `worker --help` imported the whole lifecycle (a second), `serve --help` the database
    # and the web framework: their work is imported once the command runs, not to list options.
    probe = (
        "import sys; from steelframe.cli import main\n"
        f"try: main({argv!r})\n"
        "except SystemExit: pass\n"
        "heavy = {'sqlalchemy', 'aiohttp', 'rq', 'redis', 'bot.db', 'bot.lifecycle.reconcile',\n"
        "         'steelframe.commands.core', 'steelframe.commands.worker', 'steelframe.dev',\n"
        "         'steelframe.commands.github', 'steelframe.registration',\n"
        "         'steelframe.commands.memory'}\n"
        "print(sorted(heavy & set(sys.modules)))\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, timeout=60, check=True
    )
    assert result.stdout.strip().splitlines()[-1] == "[]"
    assert f"usage: steelframe {' '.join(argv[:-1])}" in result.stdout


def test_a_command_loads_its_work_with_its_modules_frozen(tmp_path: Path) -> None:
    """The handler's module loads after parsing, still inside the collector's pause, so its
    modules are frozen as before (steelframe/collector.py)."""
    probe = (
        "import gc, sys; from steelframe.cli import main\n"
        "code = main(['reconcile'])\n"
        "print(code, 'bot.lifecycle.reconcile' in sys.modules, gc.get_freeze_count() > 100_000)\n"
    )
    env = {k: v for k, v in os.environ.items() if not k.startswith("STEELFRAME_")}
    result = subprocess.run(
        [sys.executable, "-c", probe],
        capture_output=True,
        text=True,
        timeout=60,
        env=env,
        cwd=tmp_path,  # no .env or steelframe.toml of this checkout
    )
    assert "the lifecycle needs Redis" in result.stderr
    assert result.stdout.strip().splitlines()[-1] == "2 True True"


def test_db_current_and_history_say_where_the_database_stands(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("STEELFRAME_DATABASE_URL", f"sqlite:///{tmp_path / 'cli.db'}")
    assert main(["db", "current"]) == 1
    assert "no migration applied yet" in capsys.readouterr().out
    assert main(["db", "upgrade"]) == 0
    capsys.readouterr()
    assert main(["db", "current"]) == 0
    latest = capsys.readouterr().out.split()[0]
    assert main(["db", "history"]) == 0
    history = capsys.readouterr().out.splitlines()
    assert history[0].split()[0] == "0001_foundation"
    assert history[-1].split()[:2] == ["*", latest]
    assert sum(line.startswith("*") for line in history) == 1


def test_a_database_a_newer_version_migrated_is_said_in_one_line(tmp_path: Path) -> None:
    """Rolling the image back over a database its successor migrated: `db upgrade` and
    serve once died with alembic's traceback, and `db current` called it "behind"."""
    import sqlite3

    env = _env(tmp_path)
    run = [sys.executable, "-m", "steelframe.cli"]
    options: dict[str, Any] = {"cwd": tmp_path, "env": env, "capture_output": True}
    subprocess.run([*run, "db", "upgrade"], **options, check=True, timeout=120)
    with sqlite3.connect(tmp_path / "cli.db") as connection:
        connection.execute("UPDATE alembic_version SET version_num = '0999_from_a_newer_one'")
    upgrade = subprocess.run([*run, "db", "upgrade"], **options, text=True, timeout=120)
    assert upgrade.returncode == 1 and "Traceback" not in upgrade.stderr, upgrade.stderr
    [line] = upgrade.stderr.splitlines()
    assert "is at migration 0999_from_a_newer_one, which this version does not know" in line
    current = subprocess.run([*run, "db", "current"], **options, text=True, timeout=120)
    assert current.returncode == 1 and "behind" not in current.stdout
    assert "0999_from_a_newer_one (not a migration this version knows" in current.stdout
    doctor = subprocess.run([*run, "doctor", "--offline"], **options, text=True, timeout=120)
    [said] = [line for line in doctor.stdout.splitlines() if " database " in line]
    assert said.startswith("FAIL") and "serve and dev migrate" not in said, said


def test_dotenv_in_the_working_directory_configures_the_commands(tmp_path: Path) -> None:
    env = _env(tmp_path)
    del env["STEELFRAME_DATABASE_URL"]
    env["LOG_LEVEL"] = "WARNING"  # the environment wins over the file
    (tmp_path / ".env").write_text(
        f'STEELFRAME_DATABASE_URL="sqlite:///{tmp_path / "fromfile.db"}"\n'
        "export LOG_LEVEL=DEBUG\n"
        "WEBHOOK_SECRET='from the file'\n"
    )
    result = subprocess.run(
        [sys.executable, "-m", "steelframe.cli", "config", "--list"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    rows = {line.split()[0]: line.split() for line in result.stdout.splitlines()}
    assert rows["STEELFRAME_DATABASE_URL"][1:3] == [f"sqlite:///{tmp_path / 'fromfile.db'}", ".env"]
    assert rows["STEELFRAME_LOG_LEVEL"][1:3] == ["WARNING", "environment"]
    assert rows["WEBHOOK_SECRET"][1] == "Secret('**********')"
    assert "from the file" not in result.stdout


def test_steelframe_config_names_the_toml_file_even_beside_a_steelframe_toml(
    tmp_path: Path,
) -> None:
    # docs/configuration.md: STEELFRAME_CONFIG is read "instead of ./steelframe.toml"; a
    # steelframe.toml left in the working directory must not win over the named file.
    (tmp_path / "steelframe.toml").write_text('log_level = "WARNING"\n')
    (tmp_path / "prod.toml").write_text('log_level = "DEBUG"\n')
    env = _env(tmp_path) | {"STEELFRAME_CONFIG": str(tmp_path / "prod.toml")}
    command = [sys.executable, "-m", "steelframe.cli", "config", "--list"]
    result = subprocess.run(
        command, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=60, check=True
    )
    rows = {line.split()[0]: line.split() for line in result.stdout.splitlines()}
    assert rows["STEELFRAME_LOG_LEVEL"][1:3] == ["DEBUG", str(tmp_path / "prod.toml")]
    # A named file that is missing stops start-up, though a steelframe.toml is there.
    env["STEELFRAME_CONFIG"] = str(tmp_path / "missing.toml")
    missing = subprocess.run(command, cwd=tmp_path, env=env, capture_output=True, text=True)
    assert missing.returncode == 2 and "missing.toml: cannot read" in missing.stderr
    # Named in ./.env (which fills in for the environment), the same.
    del env["STEELFRAME_CONFIG"]
    (tmp_path / ".env").write_text(f"STEELFRAME_CONFIG={tmp_path / 'prod.toml'}\n")
    result = subprocess.run(
        command, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=60, check=True
    )
    rows = {line.split()[0]: line.split() for line in result.stdout.splitlines()}
    assert rows["STEELFRAME_LOG_LEVEL"][1:3] == ["DEBUG", str(tmp_path / "prod.toml")]


def test_make_run_takes_a_port_and_a_data_folder() -> None:
    assert planned_command("run").endswith("steelframe dev")
    assert planned_command("run", "PORT=9123").endswith("steelframe dev --port 9123")
    # A second dev beside the first, and the clients that find it (the refusal's make form).
    line = planned_command("run", "DATA_DIR=../my var", "PORT=9123")
    assert line.endswith("steelframe dev --port 9123 --data-dir '../my var'"), line
    assert planned_command("tui", "DATA_DIR=../my var").endswith(
        "steelframe tui --data-dir '../my var'"
    )
    assert planned_command("desktop", "DATA_DIR=../v", "ARGS=--no-dev").endswith(
        "steelframe desktop --data-dir '../v' --no-dev"
    )


def test_make_run_installs_the_runtime_set_and_make_test_the_dev_extras(tmp_path: Path) -> None:
    """On a fresh checkout (no venv yet): `make run` installs steelframe without its dev
    extras (tests, lint, browsers: hundreds of MB a user who runs it does not need)."""
    root = Path(__file__).resolve().parent.parent
    fresh = tmp_path / "venv"  # nothing there: make plans the whole install

    def planned(target: str) -> list[str]:
        result = subprocess.run(
            ["make", "-n", "--no-print-directory", target, f"VENV={fresh}"],
            cwd=root, capture_output=True, text=True, timeout=60, check=True,
        )  # fmt: skip
        return [line for line in result.stdout.splitlines() if " pip install " in line]

    # uv installs, pip where uv cannot: both install the same set.
    run = planned("run")
    assert run and all(line.count("-e '.'") == 2 for line in run if "-e " in line)
    assert not any("[dev]" in line for line in run)
    test = [line for line in planned("test") if "-e " in line]
    assert test and all(line.count("-e '.[dev]'") == 2 for line in test)


def test_the_tuis_exported_variables_do_not_break_server_commands(tmp_path: Path) -> None:
    env = _env(tmp_path) | {"STEELFRAME_URL": "http://127.0.0.1:8080", "STEELFRAME_TOKEN": "x"}
    result = subprocess.run(
        [sys.executable, "-m", "steelframe.cli", "db", "upgrade"],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 0, result.stderr


def test_a_ctrl_c_while_the_command_loads_ends_it_without_a_traceback(tmp_path: Path) -> None:
    """`make run`, Ctrl-C at once: the SIGINT lands while `steelframe dev`'s modules are
    imported (here, as the command's module starts loading)."""
    interrupt_on_load = (
        "import importlib, os, signal, sys\n"
        "load = importlib.import_module\n"
        "def interrupted(name, *args):\n"
        "    if name == 'steelframe.dev':\n"
        "        os.kill(os.getpid(), signal.SIGINT)\n"
        "    return load(name, *args)\n"
        "importlib.import_module = interrupted\n"
        "from steelframe.cli import main\n"
        "sys.exit(main(['dev', '--port', '0']))\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", interrupt_on_load],
        cwd=tmp_path,
        env=_env(tmp_path),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 130
    assert result.stderr == ""
    assert not (tmp_path / "var").exists()  # nothing was started


@pytest.mark.parametrize(
    ("argv", "said"),
    [
        (["dev", "--prot", "9000"], "steelframe dev: error: unrecognized arguments: --prot 9000 "
         "(did you mean --port?)"),
        (["memory", "search", "login", "--flor", "0"], "steelframe memory search: error: "
         "unrecognized arguments: --flor 0 (did you mean --floor?)"),
        (["config", "--lst"], "steelframe config: error: unrecognized arguments: --lst "
         "(did you mean --list?)"),
    ],
)  # fmt: skip
def test_a_typed_wrong_option_is_the_commands_error_with_the_option_it_looks_like(
    argv: list[str], said: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """Not the top parser's usage (which lists none of the command's options) and a bare
    "unrecognized arguments": the command's usage, and the option meant."""
    with pytest.raises(SystemExit) as stopped:
        main(argv)
    assert stopped.value.code == 2
    err = capsys.readouterr().err
    command = said.split(": error:")[0]  # "steelframe dev"
    assert err.startswith(f"usage: {command} [-h]")
    assert err.strip().splitlines()[-1] == said
