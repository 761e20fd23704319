"""docs/operations.md's start-up table says, per failure, the line a newcomer sees and the
exit status: each row here is caused for real (a URL that does not parse, a database and a
Redis that refuse, a port that is taken) and the command's standard error is compared with
the line the doc quotes, `…` standing for what varies."""

from __future__ import annotations

import os
import re
import socket
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from tests.fakes.serve_process import child_env

ROOT = Path(__file__).resolve().parent.parent
REFUSING = "127.0.0.1:1"  # nothing listens on port 1


@dataclass(frozen=True)
class Row:
    """One row of the table, found by the start of its first cell."""

    failure: str
    command: tuple[str, ...]
    env: dict[str, str]
    # The doc's example values, as this run has them.
    examples: dict[str, str] = field(default_factory=dict)


def _documented(failure: str) -> tuple[str, int]:
    """The quoted `steelframe: ...` line and the exit status of the row for `failure`."""
    text = (ROOT / "docs" / "operations.md").read_text()
    rows = [line for line in text.splitlines() if line.startswith(f"| {failure}")]
    assert len(rows) == 1, f"docs/operations.md has no single row for {failure!r}"
    seen = rows[0].split(" | ")[1]
    quoted = re.search(r"`(steelframe: [^`]+)`", seen)
    status = re.search(r"exit (\d)", seen)
    assert quoted and status, rows[0]
    return quoted[1], int(status[1])


def _matches(documented: str, examples: dict[str, str], said: str) -> bool:
    for example, actual in examples.items():
        assert example in documented, f"the doc's line no longer shows {example!r}"
        documented = documented.replace(example, "\0" + actual + "\0")
    parts = []
    for piece in documented.split("…"):
        literal = piece.split("\0")
        parts.append("".join(re.escape(bit) for bit in literal))
    return re.fullmatch(".*?".join(parts), said) is not None


def _busy_port() -> socket.socket:
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen()
    return sock


def _run(row: Row, tmp_path: Path) -> subprocess.CompletedProcess[str]:
    env = {"STEELFRAME_DATA_DIR": str(tmp_path / "data"), **row.env}
    return subprocess.run(
        [sys.executable, "-m", "steelframe.cli", *row.command],
        cwd=tmp_path,
        env=child_env(env),
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


ROWS = [
    Row(
        "a malformed database URL",
        ("serve", "--port", "0"),
        {"STEELFRAME_DATABASE_URL": "not-a-url"},
    ),
    Row(
        "an unsupported database",
        ("serve", "--port", "0"),
        {"STEELFRAME_DATABASE_URL": "mysql://bot:pw@db/steelframe"},
    ),
    Row(
        "the database does not answer",
        ("serve", "--port", "0"),
        {"STEELFRAME_DATABASE_URL": f"postgresql://bot:pw@{REFUSING}/db"},
        {"@host/db": f"@{REFUSING}/db"},
    ),
    Row(
        "Redis does not answer",
        ("worker",),
        {"STEELFRAME_REDIS_URL": f"redis://{REFUSING}/0"},
    ),
    Row(
        "Redis does not answer",
        ("reconcile",),
        {"STEELFRAME_REDIS_URL": f"redis://{REFUSING}/0"},
    ),
]


@pytest.mark.parametrize("row", ROWS, ids=lambda row: f"{row.failure}: {row.command[0]}")
def test_a_start_up_failure_says_what_operations_md_quotes(row: Row, tmp_path: Path) -> None:
    documented, status = _documented(row.failure)
    result = _run(row, tmp_path)
    lines = result.stderr.splitlines()
    assert any(_matches(documented, row.examples, line) for line in lines), (
        f"docs/operations.md quotes\n  {documented}\n{row.command[0]} said\n{result.stderr}"
    )
    assert result.returncode == status


@pytest.mark.parametrize("command", ["serve", "dev"])
def test_a_taken_port_says_what_operations_md_quotes(command: str, tmp_path: Path) -> None:
    documented, status = _documented("the port is taken")
    with _busy_port() as sock:
        port = sock.getsockname()[1]
        row = Row("the port is taken", (command, "--port", str(port)), {})
        result = _run(row, tmp_path)
    said = result.stderr.splitlines()
    assert any(_matches(documented, {"127.0.0.1:8080": f"127.0.0.1:{port}"}, s) for s in said), (
        result.stderr
    )
    assert result.returncode == status


def test_a_second_dev_on_a_data_folder_says_what_operations_md_quotes(tmp_path: Path) -> None:
    from steelframe.dev import hold_data_dir, record_url

    documented, status = _documented("a second `steelframe dev`")
    folder = tmp_path / "data"
    held = hold_data_dir(folder)  # the running dev's hold (this process plays it)
    assert held is not None
    record_url(held, "http://127.0.0.1:8123")  # bound and serving, as a dev that runs
    try:
        result = _run(
            Row("a second dev", ("dev", "--port", "0", "--data-dir", "data"), {}), tmp_path
        )
    finally:
        held.close()
    examples = {
        "4242": str(os.getpid()),
        "/home/you/steelframe/var": str(folder),
        "127.0.0.1:8080": "127.0.0.1:8123",
    }
    assert any(_matches(documented, examples, line) for line in result.stderr.splitlines()), (
        f"docs/operations.md quotes\n  {documented}\ndev said\n{result.stderr}"
    )
    assert result.returncode == status
