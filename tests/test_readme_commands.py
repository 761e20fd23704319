"""The commands a newcomer pastes work as printed: every command in the README's shell
blocks exists (make targets, `steelframe …` with `--help`), the README's curl calls answer
against a running `steelframe dev`, and so does every command its banner prints."""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.test_dev_demo_loop import CONFIG_VARS, Dev, _start, _stop

ROOT = Path(__file__).resolve().parent.parent
ASSIGNMENT = re.compile(r"^[A-Z_]+=")


def readme_commands() -> list[str]:
    """Each command line of the README's ```sh blocks: continuations joined, comments off."""
    text = (ROOT / "README.md").read_text()
    commands: list[str] = []
    for block in re.findall(r"```sh\n(.*?)```", text, flags=re.DOTALL):
        for line in block.replace("\\\n", " ").splitlines():
            if shlex.split(line, comments=True):
                commands.append(line.strip())  # as pasted: bash expands $URL, drops comments
    return commands


def program(command: str) -> list[str]:
    """The words after any leading VAR=value assignments."""
    words = shlex.split(command, comments=True)
    while words and ASSIGNMENT.match(words[0]):
        words.pop(0)
    return words


def make_targets() -> set[str]:
    return set(re.findall(r"^([a-z][\w.-]*):", (ROOT / "Makefile").read_text(), re.MULTILINE))


def _shell(command: str, cwd: Path, **variables: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(CONFIG_VARS)}
    env.update(variables)
    return subprocess.run(
        ["bash", "-c", command], cwd=cwd, env=env, capture_output=True, text=True, timeout=120
    )


def test_every_readme_command_exists_and_answers_help() -> None:
    commands = readme_commands()
    targets = make_targets()
    kinds: set[str] = set()
    for command in commands:
        words = program(command)
        if not words:
            continue  # only assignments (URL=... TOKEN=...)
        first = words[0]
        kinds.add(first)
        if first == "make":
            assert words[1] in targets, f"README says `{command}`: no such make target"
        elif first == "source":
            assert (ROOT / words[1]).is_file() or words[1] == ".venv/bin/activate", command
        elif first.rsplit("/", 1)[-1].startswith("steelframe"):
            name = first.rsplit("/", 1)[-1]
            sub = [w for w in words[1:2] if not w.startswith("-")]
            helped = _shell(shlex.join([name, *sub, "--help"]), ROOT, PATH=_venv_path())
            assert helped.returncode == 0, f"{command}: {helped.stderr}"
        else:
            assert first == "curl", f"README command of an unknown kind: {command}"
    assert {"make", "curl", "source"} <= kinds


def _venv_path() -> str:
    """PATH with the venv first, as `source .venv/bin/activate` leaves it."""
    import sys

    return f"{Path(sys.executable).parent}:{os.environ.get('PATH', '')}"


@pytest.fixture
def dev(tmp_path: Path) -> Iterator[Dev]:
    running = _start(tmp_path)
    try:
        yield running
    finally:
        if running.process.poll() is None:
            _stop(running)


def test_the_readme_and_the_banner_run_as_printed_against_dev(dev: Dev, tmp_path: Path) -> None:
    # The README's curl calls, with URL and TOKEN as `make run` printed them.
    for command in (c for c in readme_commands() if program(c)[:1] == ["curl"]):
        ran = _shell(command, tmp_path, URL=dev.url, TOKEN=dev.token)
        assert ran.returncode == 0, f"{command}: {ran.stderr}"
        answer = json.loads(ran.stdout)
        assert "error" not in answer, (command, answer)
        assert answer.get("reply") or "tasks" in answer, (command, answer)
    # The banner: its commands as printed, bare names only where PATH finds them.
    banner = "".join(dev.lines)
    # The TUI and the window find this dev (on ./var) by themselves: no token to paste, and
    # none on a command line (`ps` shows that); tests/test_tui_finds_dev.py runs them.
    tui = re.search(r"^  (\S*steelframe) tui$", banner, re.MULTILINE)
    assert tui, banner
    assert "--token" not in banner and "STEELFRAME_TOKEN" not in banner
    assert _shell(f"{tui[1]} tui --help", tmp_path).returncode == 0
    desktop = re.search(r"own window: (\S*steelframe) desktop$", banner, re.MULTILINE)
    assert desktop and _shell(f"{desktop[1]} desktop --help", tmp_path).returncode == 0
    doctor = re.search(r"Check the configuration: (.+)$", banner, re.MULTILINE)
    assert doctor
    checked = _shell(doctor[1], tmp_path)
    assert checked.returncode == 0, checked.stdout + checked.stderr  # dev's own configuration
    curl = re.search(
        r"^  \(or, without the TUI:\n  (curl .+?)\)$", banner, re.MULTILINE | re.DOTALL
    )
    assert curl, banner
    filed = _shell(curl[1].replace("\\\n", " "), tmp_path)
    assert filed.returncode == 0 and json.loads(filed.stdout)["reply"], filed.stderr
