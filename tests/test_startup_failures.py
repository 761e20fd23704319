"""Start-up under faults: processes started together on a fresh database, and the one-line
messages for the infrastructure failures a newcomer meets (docs/operations.md)."""

from __future__ import annotations

import asyncio
import os
import socket
import socketserver
import subprocess
import sys
import threading
import urllib.request
from pathlib import Path

import pytest

from bot.config import Settings
from steelframe.listening import announced_url
from tests.fakes.ports import refused_port
from tests.fakes.workers import CREDENTIAL_VARS, stop_processes


def _env(tmp_path: Path, **settings: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(CREDENTIAL_VARS)}
    env["STEELFRAME_DATA_DIR"] = str(tmp_path / "var")
    env.update(settings)
    return env


def _served_port(log: Path) -> int | None:
    """The port of the line where serve says its URL (`url: http://host:port`, or a JSON
    record's `url`; it binds port 0 and says where: a port probed free and handed over
    could be taken meanwhile), once printed."""
    for line in log.read_text().splitlines():
        if (url := announced_url(line)) is not None:
            return int(url.rsplit(":", 1)[1].strip("/"))
    return None


def _start(args: list[str], env: dict[str, str], log: Path) -> subprocess.Popen[bytes]:
    with open(log, "wb") as out:
        return subprocess.Popen(
            [sys.executable, "-m", "steelframe.cli", *args],
            env=env,
            cwd=log.parent,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )


def _healthy(port: int) -> bool:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/healthz", timeout=5) as answer:
            return answer.status == 200
    except OSError:
        return False


@pytest.mark.slow
async def test_two_serves_and_two_workers_started_at_once_on_a_fresh_schema_all_come_up(
    pg_url: str, redis_url: str, tmp_path: Path
) -> None:
    env = _env(tmp_path, STEELFRAME_DATABASE_URL=pg_url, STEELFRAME_REDIS_URL=redis_url)
    serve_logs = [tmp_path / f"serve-{n}.log" for n in (1, 2)]
    processes = [_start(["serve", "--port", "0"], env, log) for log in serve_logs] + [
        _start(["worker", "--in-process"], env, tmp_path / f"worker-{n}.log") for n in (1, 2)
    ]
    logs = [*serve_logs, *(tmp_path / f"worker-{n}.log" for n in (1, 2))]
    try:
        loop = asyncio.get_running_loop()
        deadline = loop.time() + 120
        while True:
            ports = [_served_port(log) for log in serve_logs]
            served = [
                port is not None and await asyncio.to_thread(_healthy, port) for port in ports
            ]
            listening = [
                "listening on" in (tmp_path / f"worker-{n}.log").read_text() for n in (1, 2)
            ]
            exited = {p.args[3]: p.returncode for p in processes if p.poll() is not None}
            report = "\n".join(f"--- {log.name}\n{log.read_text()[-2000:]}" for log in logs)
            assert not exited, f"a process exited: {exited}\n{report}"
            if all(served) and all(listening):
                break
            assert loop.time() < deadline, f"not all came up: {served} {listening}\n{report}"
            await asyncio.sleep(0.2)
    finally:
        await stop_processes(processes, within=20)
    text = "".join(log.read_text() for log in logs)
    assert "Traceback" not in text and "UniqueViolation" not in text, text[-3000:]


def _run(tmp_path: Path, *args: str, **settings: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "steelframe.cli", *args],
        env=_env(tmp_path, **settings),
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
    )


def _one_line_naming(result: subprocess.CompletedProcess[str], *words: str) -> str:
    assert result.returncode != 0
    assert "Traceback" not in result.stderr, result.stderr
    lines = [line for line in result.stderr.splitlines() if line.startswith("steelframe:")]
    assert len(lines) == 1, result.stderr
    for word in words:
        assert word in lines[0], lines[0]
    return lines[0]


@pytest.mark.parametrize(
    ("url", "words"),
    [
        ("not a url", ("STEELFRAME_DATABASE_URL", "not a database URL")),
        ("mysql://bot@db/steelframe", ("STEELFRAME_DATABASE_URL", "not supported")),
        (
            "postgresql://bot:hunter2@127.0.0.1:{port}/steelframe",
            ("STEELFRAME_DATABASE_URL", "cannot use the database", "refused"),
        ),
    ],
)
def test_a_bad_or_unreachable_database_is_one_line_naming_the_setting(
    tmp_path: Path, url: str, words: tuple[str, ...]
) -> None:
    result = _run(
        tmp_path, "db", "upgrade", STEELFRAME_DATABASE_URL=url.format(port=refused_port())
    )
    line = _one_line_naming(result, *words)
    assert "hunter2" not in result.stderr + result.stdout, line


def test_the_postgres_scheme_alias_is_accepted(postgres_server: str) -> None:
    alias = postgres_server.replace("postgresql+psycopg://", "postgres://", 1)
    assert alias.startswith("postgres://")
    settings = Settings.from_env({"STEELFRAME_DATABASE_URL": alias})
    assert settings.database_url.startswith("postgresql+psycopg://")


def test_an_unreachable_redis_is_one_line_naming_the_setting(tmp_path: Path) -> None:
    result = _run(
        tmp_path, "worker", "--burst", STEELFRAME_REDIS_URL=f"redis://127.0.0.1:{refused_port()}/0"
    )
    _one_line_naming(result, "cannot reach Redis", "STEELFRAME_REDIS_URL")
    assert "reconcile" not in result.stdout  # nothing was attempted without Redis


class _WebServer(socketserver.StreamRequestHandler):
    """What a web server says to anything that is not HTTP: a 400 status line."""

    def handle(self) -> None:
        self.rfile.readline()
        self.wfile.write(b"HTTP/1.1 400 Bad Request\r\nConnection: close\r\n\r\n")


def test_a_redis_url_at_a_web_server_is_one_line_naming_the_setting(tmp_path: Path) -> None:
    """A port that is another service's answers, but not as Redis."""
    with socketserver.ThreadingTCPServer(("127.0.0.1", 0), _WebServer) as server:
        threading.Thread(target=server.serve_forever, daemon=True).start()
        try:
            url = f"redis://127.0.0.1:{server.server_address[1]}/0"
            result = _run(tmp_path, "worker", "--burst", STEELFRAME_REDIS_URL=url)
        finally:
            server.shutdown()
    _one_line_naming(result, "does not speak Redis", "STEELFRAME_REDIS_URL")


@pytest.mark.parametrize(
    "command", [("serve", "--port", "0"), ("worker", "--burst"), ("memory", "add", "a note")]
)
def test_a_data_folder_that_cannot_be_made_is_one_line_naming_the_setting(
    tmp_path: Path, redis_url: str, command: tuple[str, ...]
) -> None:
    """With the database elsewhere (PostgreSQL in a deployment), serve once said ready
    with a data folder it could not make (the memory index, worktrees and setup cache live
    there), and `memory add` died with a traceback."""
    (tmp_path / "a-file").write_text("where a folder should be\n")
    data_dir = tmp_path / "a-file" / "data"
    result = _run(
        tmp_path,
        *command,
        STEELFRAME_DATA_DIR=str(data_dir),
        STEELFRAME_DATABASE_URL=f"sqlite:///{tmp_path / 'elsewhere.db'}",
        STEELFRAME_REDIS_URL=redis_url,
    )
    _one_line_naming(result, f"cannot make the data folder {data_dir}", "STEELFRAME_DATA_DIR")


def test_a_busy_port_is_one_line_naming_the_option(tmp_path: Path) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        result = _run(tmp_path, "serve", "--port", str(port))
    _one_line_naming(result, f"127.0.0.1:{port}", "already in use", "--port")


def test_every_command_in_a_checkout_uses_one_absolute_database(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    from steelframe.cli import load_settings

    for name in [n for n in os.environ if n.startswith(CREDENTIAL_VARS)]:
        monkeypatch.delenv(name)
    settings = load_settings()
    assert settings.data_dir == tmp_path.resolve() / "var"
    assert settings.database_url == f"sqlite:///{tmp_path.resolve() / 'var' / 'steelframe.db'}"
    monkeypatch.setenv("STEELFRAME_DATABASE_URL", "sqlite:///relative/x.db")
    assert load_settings().database_url == f"sqlite:///{tmp_path.resolve() / 'relative/x.db'}"
