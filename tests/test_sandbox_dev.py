"""`steelframe dev` brings the GitHub sandbox up and wires it to the service."""

from __future__ import annotations

import asyncio
import os
import signal
import socket
import sqlite3
import sys
import time
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from github_sandbox import Sandbox, generate_app_keys
from github_sandbox.devmode import start_dev_sandbox
from tests.fakes.patience import PATIENCE_SECONDS

ROOT = Path(__file__).resolve().parents[1]


def dev_env(tmp_path: Path, redis_url: str) -> dict[str, str]:
    keep = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith("STEELFRAME_")
        and k
        not in {"APP_ID", "PRIVATE_KEY", "PRIVATE_KEY_PATH", "WEBHOOK_SECRET", "GITHUB_API_URL"}
    }
    return {
        **keep,
        "STEELFRAME_DATABASE_URL": f"sqlite:///{tmp_path / 'dev.db'}",
        "STEELFRAME_DATA_DIR": str(tmp_path / "var"),
        "STEELFRAME_CHECKOUT": str(tmp_path),
        "STEELFRAME_REDIS_URL": redis_url,
        "STEELFRAME_LOG_LEVEL": "WARNING",
    }


async def read_until(stream: asyncio.StreamReader, prefix: str, seen: dict[str, str]) -> str:
    while prefix not in seen:
        line = (await asyncio.wait_for(stream.readline(), 60)).decode()
        assert line, f"dev exited before printing {prefix!r}; saw {seen}"
        key, _, value = line.strip().partition(": ")
        seen[key] = value
    return seen[prefix]


def stored_events(db: Path) -> list[tuple[str, str | None, str]]:
    with sqlite3.connect(db) as connection:
        return list(
            connection.execute(
                "SELECT event, action, status FROM github_deliveries ORDER BY received_at"
            )
        )


async def test_dev_brings_up_the_sandbox_and_its_webhooks_reach_the_service(
    tmp_path: Path, redis_url: str
) -> None:
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "steelframe.cli",
        "dev",
        "--use-configured-services",  # this test's database and Redis
        "--port",
        "0",
        cwd=tmp_path,
        env=dev_env(tmp_path, redis_url),
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.DEVNULL,
    )
    assert process.stdout is not None
    try:
        seen: dict[str, str] = {}
        await read_until(process.stdout, "token", seen)
        sandbox_url = seen["github"].split()[2]
        assert "steelframe-dev/sandbox" in seen["github"] and seen["url"].startswith("http://")
        secret_file = tmp_path / "var/github-sandbox/control-secret"
        assert secret_file.stat().st_mode & 0o777 == 0o600
        control = {"X-Sandbox-Secret": secret_file.read_text()}
        async with aiohttp.ClientSession(headers=control) as session:
            async with session.post(f"{sandbox_url}/_sandbox/users", json={"login": "ada"}) as r:
                token = (await r.json())["token"]
            async with session.post(
                f"{sandbox_url}/repos/steelframe-dev/sandbox/issues",
                json={"title": "Hello from the sandbox"},
                headers={"Authorization": f"token {token}"},
            ) as r:
                assert r.status == 201
            async with session.get(f"{sandbox_url}/_sandbox/state") as r:
                clone_url = (await r.json())["repos"]["steelframe-dev/sandbox"]["clone_url"]
        deadline = time.monotonic() + PATIENCE_SECONDS
        while ("issues", "opened", "processed") not in stored_events(tmp_path / "dev.db"):
            assert time.monotonic() < deadline, stored_events(tmp_path / "dev.db")
            await asyncio.sleep(0.1)
        assert stored_events(tmp_path / "dev.db")[0][0] == "ping"
        clone = await asyncio.create_subprocess_exec(
            "git",
            "clone",
            "-q",
            clone_url,
            str(tmp_path / "clone"),
            stderr=asyncio.subprocess.DEVNULL,
        )
        assert await clone.wait() == 0 and (tmp_path / "clone" / "README.md").exists()
    finally:
        if process.returncode is None:
            process.send_signal(signal.SIGINT)
            await asyncio.wait_for(process.wait(), PATIENCE_SECONDS)
    assert (tmp_path / "var" / "github-sandbox" / "world.pickle").exists()


async def test_the_dev_sandbox_keeps_its_world_across_restarts(tmp_path: Path) -> None:
    first = await start_dev_sandbox(tmp_path, "acme/app")
    sandbox: Sandbox = first.server.sandbox
    repo = sandbox.world.repo("acme/app")
    assert repo is not None
    sandbox.ops.create_issue(repo, sandbox.world.user("ada"), {"title": "one"})
    await first.close()
    second = await start_dev_sandbox(tmp_path, "acme/app")
    again = second.server.sandbox.world.repo("acme/app")
    assert again is not None and [i.title for i in again.issues.values()] == ["one"]
    assert again.next_number == 2 and len(second.server.sandbox.world.installations) == 1
    assert second.private_key != first.private_key  # a new key each run; the world adopts it
    # A new control secret each run too, in the file the developer's tools read.
    assert second.control_secret != first.control_secret
    assert (tmp_path / "control-secret").read_text() == second.control_secret
    _, public = generate_app_keys()
    assert second.server.sandbox.world.app.public_key_pem != public
    await second.close()


async def test_the_dev_sandbox_keeps_its_port_and_takes_another_when_it_is_held(
    tmp_path: Path, caplog: Any
) -> None:
    # The port is fixed by what is tested (the sandbox comes back on the port of its last
    # run), so between a close and the next start another process can take it: that fails
    # as a collision, said as one, not as the sandbox moving for no reason.
    first = await start_dev_sandbox(tmp_path / "gh", "steelframe-dev/sandbox")
    port = int(first.url.rsplit(":", 1)[1])
    taken = f"port {port} was taken by another process meanwhile (a collision with another test)"
    await first.close()
    again = await start_dev_sandbox(tmp_path / "gh", "steelframe-dev/sandbox")
    try:
        if again.url != first.url and f"port {port} of the last run is taken" in caplog.text:
            pytest.fail(taken)
        assert again.url == first.url
    finally:
        await again.close()
    # Another process holds the port now: a free one, a warning, and that one is kept.
    holder = socket.socket()
    try:
        holder.bind(("127.0.0.1", port))
    except OSError:
        holder.close()
        pytest.fail(taken)
    holder.listen()
    try:
        moved = await start_dev_sandbox(tmp_path / "gh", "steelframe-dev/sandbox")
        await moved.close()
    finally:
        holder.close()
    assert moved.url != first.url
    assert f"port {port} of the last run is taken" in caplog.text
    assert (tmp_path / "gh" / "port").read_text().strip() == moved.url.rsplit(":", 1)[1]
