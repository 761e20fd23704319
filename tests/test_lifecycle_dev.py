"""`steelframe dev` runs the lifecycle with nothing installed: an embedded Redis, an
in-process worker, the local GitHub sandbox; a labelled issue becomes a pull request."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import urllib.request
from pathlib import Path
from typing import Any

import pytest

from tests.fakes.coding import command
from tests.fakes.patience import PATIENCE_SECONDS
from tests.fakes.sandbox import sandbox_settings

CONFIG_VARS = ("STEELFRAME_", "APP_ID", "PRIVATE_KEY", "WEBHOOK_SECRET", "GITHUB_API_URL")


def _call(method: str, url: str, body: dict[str, Any] | None, auth: str, control: str = "") -> Any:
    headers = {"Authorization": auth, "Content-Type": "application/json"}
    if control:  # the dev sandbox's control API: its start secret (docs/github.md)
        headers["X-Sandbox-Secret"] = control
    request = urllib.request.Request(
        url,
        method=method,
        data=None if body is None else json.dumps(body).encode(),
        headers=headers,
    )
    with urllib.request.urlopen(request, timeout=PATIENCE_SECONDS) as response:
        return json.load(response)


@pytest.mark.slow
def test_dev_runs_a_worker_on_an_embedded_redis_that_delivers_a_labelled_issue(
    tmp_path: Path,
) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith(CONFIG_VARS)}
    env["STEELFRAME_CODING_COMMAND"] = command("commit")
    sandbox = sandbox_settings(tmp_path)
    env["STEELFRAME_CODING_SANDBOX"] = sandbox["coding_sandbox"]
    env["STEELFRAME_CODING_READ_ONLY_PATHS"] = os.pathsep.join(
        map(str, sandbox["coding_read_only_paths"])
    )
    # Absolute: the dev sandbox turns its repositories' paths into file:// clone URLs.
    data_dir = str(tmp_path / "var")
    process = subprocess.Popen(
        [sys.executable, "-m", "steelframe.cli", "dev", "--port", "0", "--data-dir", data_dir],
        cwd=tmp_path,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    lines: list[str] = []
    try:
        assert process.stdout is not None
        for line in process.stdout:
            lines.append(line)
            if line.startswith("worker: "):
                break
        seen = {line.split(":", 1)[0]: line.split(" ", 1)[1].strip() for line in lines}
        url, token = seen["url"], seen["token"]
        sandbox = seen["github"].split(" ")[2]
        health = _call("GET", f"{url}/healthz", None, "")
        assert health["redis"] is True
        repo = "steelframe-dev/sandbox"
        control = (tmp_path / "var/github-sandbox/control-secret").read_text()
        _call(
            "POST", f"{sandbox}/_sandbox/repos/{repo}/collaborators", {"login": "ada"}, "", control
        )
        user = _call("POST", f"{sandbox}/_sandbox/users", {"login": "ada"}, "", control)["token"]
        issue = _call(
            "POST",
            f"{sandbox}/repos/{repo}/issues",
            {"title": "Dev loop", "body": "try it", "labels": ["steelframe:work-on-this"]},
            f"token {user}",
        )
        deadline = time.monotonic() + 60
        tasks: list[dict[str, Any]] = []
        while time.monotonic() < deadline:
            tasks = _call("GET", f"{url}/api/operator/board", None, f"Bearer {token}")["tasks"]
            if tasks and tasks[0]["state"] == "delivered":
                break
            time.sleep(0.2)
        assert tasks and tasks[0]["issue"] == issue["number"], "".join(lines)
        assert tasks[0]["state"] == "delivered" and tasks[0]["pr_url"]
    finally:
        process.terminate()
        rest = process.communicate(timeout=PATIENCE_SECONDS)[0]
    assert process.returncode == 0, rest
    assert "steelframe dev: starting an embedded Redis" in "".join(lines)
