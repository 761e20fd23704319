"""The dev loop as a newcomer times it: `steelframe dev` with nothing configured, then
filing -> pull request (a Chat filing until the demo runtime's PR is on the board) and
Publish -> pull request (a one-line issue's question answered: the Decision published
until the task delivers). Beside the same loop with GitHub's 1 s write pacing, which dev
used to keep against its local sandbox.

    python -m bench.dev_loop [--rounds N] [--smoke]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bench._stats import percentile

CONFIG_VARS = ("STEELFRAME_", "APP_ID", "PRIVATE_KEY", "WEBHOOK_SECRET", "GITHUB_API_URL")
WAIT_SECONDS = 120.0


@dataclass
class Dev:
    process: subprocess.Popen[str]
    url: str
    token: str
    lines: list[str] = field(default_factory=list)

    def call(self, method: str, path: str, body: dict[str, Any] | None = None) -> Any:
        request = urllib.request.Request(
            f"{self.url}{path}",
            method=method,
            data=None if body is None else json.dumps(body).encode(),
            headers={"Authorization": f"Bearer {self.token}", "Content-Type": "application/json"},
        )
        with urllib.request.urlopen(request, timeout=60) as response:
            return json.load(response)

    def until_state(self, issue: int, state: str) -> dict[str, Any]:
        def found() -> dict[str, Any] | None:
            tasks = self.call("GET", "/api/operator/board")["tasks"]
            task = next((t for t in tasks if t["issue"] == issue), None)
            return task if task is not None and task["state"] == state else None

        return _until(found, f"#{issue} {state}")


def _until(check: Callable[[], Any], what: str) -> Any:
    deadline = time.monotonic() + WAIT_SECONDS
    while time.monotonic() < deadline:
        found = check()
        if found:
            return found
        time.sleep(0.02)
    raise RuntimeError(f"timed out waiting for {what}")


def start_dev(folder: Path, **variables: str) -> Dev:
    env = {k: v for k, v in os.environ.items() if not k.startswith(CONFIG_VARS)}
    env.update(variables)
    process = subprocess.Popen(
        [sys.executable, "-m", "steelframe.cli", "dev", "--port", "0"],
        cwd=folder,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    assert process.stdout is not None
    lines: list[str] = []
    for line in process.stdout:
        lines.append(line)
        if line.startswith("Board: "):
            break
    seen = {line.split(":", 1)[0]: line.split(" ", 1)[1].strip() for line in lines if ": " in line}
    if "url" not in seen:
        raise RuntimeError("steelframe dev did not start:\n" + "".join(lines))
    dev = Dev(process, seen["url"], seen["token"], lines)
    threading.Thread(
        target=lambda: [lines.append(x) for x in process.stdout or []], daemon=True
    ).start()
    return dev


def stop_dev(dev: Dev) -> None:
    dev.process.terminate()
    dev.process.wait(timeout=30)


@dataclass
class Round:
    filing_reply: float
    filing_to_pr: float
    publish_to_pr: float


def one_round(dev: Dev, n: int) -> Round:
    started = time.perf_counter()
    filed = dev.call(
        "POST",
        "/api/operator/chat",
        {"message": f"file an issue for the login page {n}, which is blank after a wrong password"},
    )
    replied = time.perf_counter() - started
    dev.until_state(filed["filed_issue_number"], "delivered")
    to_pr = time.perf_counter() - started
    short = dev.call("POST", "/api/operator/chat", {"message": f"file an issue for flaky test {n}"})
    number = short["filed_issue_number"]
    dev.until_state(number, "waiting_for_info")
    discuss = dev.call("POST", "/api/operator/chat/new", {"issue": number})
    drafted = dev.call(
        "POST",
        "/api/operator/chat",
        {"message": "draft a decision: retry the step twice", "session": discuss["id"]},
    )
    started = time.perf_counter()
    dev.call(
        "POST",
        "/api/operator/chat/decision",
        {"issue": number, "body": drafted["decision_body"], "session_id": discuss["id"]},
    )
    dev.until_state(number, "delivered")
    return Round(replied, to_pr, time.perf_counter() - started)


def measure(rounds: int, **variables: str) -> list[Round]:
    with tempfile.TemporaryDirectory(prefix="bench-dev-") as folder:
        dev = start_dev(Path(folder), **variables)
        try:
            return [one_round(dev, n) for n in range(rounds)]
        finally:
            stop_dev(dev)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3, help="filings and publishes per run")
    parser.add_argument("--smoke", action="store_true", help="one unpaced round")
    args = parser.parse_args(argv)
    runs = {"dev (no pacing)": measure(1 if args.smoke else args.rounds)}
    if not args.smoke:
        runs["paced 1 s (before)"] = measure(args.rounds, STEELFRAME_GITHUB_WRITE_INTERVAL="1.0")
    print(f"{'':20} {'filing reply':>14} {'filing -> PR':>14} {'publish -> PR':>14}   (p50)")
    for name, found in runs.items():
        cells = [
            percentile([getattr(r, attr) for r in found], 50)
            for attr in ("filing_reply", "filing_to_pr", "publish_to_pr")
        ]
        print(f"{name:20} " + " ".join(f"{cell:12.2f} s" for cell in cells))


if __name__ == "__main__":
    main()
