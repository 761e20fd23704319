"""`make run` as a newcomer sees it: `steelframe dev` with nothing configured runs the demo
coding runtime, so an issue filed in Chat becomes a pull request in the sandbox, a one-line
issue goes through question -> Discuss -> Publish -> resume, and every link Chat printed
opens as an HTML page (also after a restart, on the same port)."""

from __future__ import annotations

import json
import os
import re
import subprocess
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests.fakes.dev_process import CONFIG_VARS as CONFIG_VARS  # tests import it here
from tests.fakes.dev_process import lines_through, popen_dev
from tests.fakes.patience import PATIENCE_SECONDS

DEADLINE = 90.0
URL = re.compile(r"https?://[^\s)\]>\"'`]+")


@dataclass
class Dev:
    process: subprocess.Popen[str]
    lines: list[str]
    url: str
    token: str
    sandbox: str

    def call(self, method: str, path: str, body: dict[str, Any] | None = None) -> Any:
        request = urllib.request.Request(
            f"{self.url}{path}",
            method=method,
            data=None if body is None else json.dumps(body).encode(),
            headers={"Authorization": f"Bearer {self.token}", "Content-Type": "application/json"},
        )
        with urllib.request.urlopen(request, timeout=30) as response:
            return json.load(response)

    def chat(self, message: str, **extra: Any) -> dict[str, Any]:
        answer: dict[str, Any] = self.call(
            "POST", "/api/operator/chat", {"message": message, **extra}
        )
        return answer

    def task(self, issue: int) -> dict[str, Any] | None:
        tasks = self.call("GET", "/api/operator/board")["tasks"]
        return next((t for t in tasks if t["issue"] == issue), None)

    def wait_for(self, issue: int, state: str) -> dict[str, Any]:
        return _until(lambda: _in_state(self.task(issue), state), f"#{issue} {state}", self)

    def messages(self, session: str) -> list[str]:
        found = self.call("GET", f"/api/operator/chat?session={session}")["messages"]
        return [str(m["content"]) for m in found]

    def wait_for_message(self, session: str, words: str) -> list[str]:
        def seen() -> list[str] | None:
            texts = self.messages(session)
            return texts if any(words in text for text in texts) else None

        found: list[str] = _until(seen, f"{words!r} in chat", self)
        return found


def _in_state(task: dict[str, Any] | None, state: str) -> dict[str, Any] | None:
    return task if task is not None and task["state"] == state else None


def _until(check: Callable[[], Any], what: str, dev: Dev) -> Any:
    deadline = time.monotonic() + DEADLINE
    while time.monotonic() < deadline:
        found = check()
        if found:
            return found
        time.sleep(0.3)
    raise AssertionError(f"timed out waiting for {what}:\n" + "".join(dev.lines[-80:]))


def _start(cwd: Path) -> Dev:
    """`steelframe dev` in `cwd`, once it printed its next steps; its output is kept."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(CONFIG_VARS)}
    # Nothing configured: the default relative data directory (./var under cwd), the demo
    # coding runtime, the offline chat runtime.
    process = popen_dev(cwd, env)
    lines = lines_through(process, "Board: ")
    seen = {line.split(":", 1)[0]: line.split(" ", 1)[1].strip() for line in lines if ": " in line}
    assert "url" in seen, "".join(lines)
    dev = Dev(process, lines, seen["url"], seen["token"], seen["github"].split(" ")[2])

    def drain() -> None:
        assert process.stdout is not None
        for line in process.stdout:
            lines.append(line)

    threading.Thread(target=drain, daemon=True).start()
    return dev


def _stop(dev: Dev) -> None:
    dev.process.terminate()
    dev.process.wait(timeout=PATIENCE_SECONDS)
    assert dev.process.returncode == 0, "".join(dev.lines[-40:])


@pytest.fixture
def dev(tmp_path: Path) -> Iterator[Dev]:
    running = _start(tmp_path)
    try:
        yield running
    finally:
        if running.process.poll() is None:
            _stop(running)


def _page(url: str) -> str:
    with urllib.request.urlopen(url, timeout=30) as response:
        assert response.status == 200, url
        assert response.headers.get_content_type() == "text/html", url
        text: str = response.read().decode()
        return text


def _links(*texts: str) -> set[str]:
    return {match.rstrip(".,;:") for text in texts for match in URL.findall(text)}


@pytest.mark.slow
def test_make_run_files_an_issue_in_chat_and_the_demo_runtime_opens_a_pull_request(
    dev: Dev, tmp_path: Path
) -> None:
    assert any(line.startswith("coding: demo runtime") for line in dev.lines), dev.lines
    assert any("Try it:" in line for line in dev.lines)
    filed = dev.chat(
        "file an issue for the login page, which shows a blank screen after a wrong password"
    )
    number = filed["filed_issue_number"]
    assert number and filed["filed_task_started"], filed
    task = dev.wait_for(number, "delivered")
    pull = _page(task["pr_url"])
    assert "demo runtime" in pull
    assert f"notes/issue-{number}.md" in pull
    assert "blank screen after a wrong password" in pull  # the pinned issue text, in the diff
    assert "STEELFRAME_CODING_AGENT" in pull
    # The task's result reached the chat session, and every link Chat printed opens.
    texts = dev.wait_for_message(filed["session"], "was delivered")
    links = _links(filed["reply"], *texts)
    assert filed["filed_issue_url"] in links and task["pr_url"] in links, links
    for link in links:
        _page(link)
    # The issue page shows its labels and the progress comment.
    issue = _page(filed["filed_issue_url"])
    assert "steelframe:delivered" in issue and "steelframe:work-on-this" in issue
    # The test asked dev's API every 0.3 s: its terminal keeps no line a request
    # (STEELFRAME_ACCESS_LOG is off unless set, as for `serve`).
    assert not [line for line in dev.lines if "aiohttp.access" in line], dev.lines[-5:]
    # Nor RQ's bookkeeping a job (registries, result kept for N seconds, "Job OK"): the
    # lifecycle's own lines tell the run's start and end.
    assert not [line for line in dev.lines if " INFO rq." in line], dev.lines[-5:]
    assert any(f"lifecycle: task {task['id']} runs by" in line for line in dev.lines)
    # Restarted on the same data directory, the sandbox answers on the same port.
    _stop(dev)
    again = _start(tmp_path)
    try:
        assert again.sandbox == dev.sandbox
        for link in links:
            _page(link)
    finally:
        _stop(again)


@pytest.mark.slow
def test_a_one_line_issue_gets_a_question_then_discuss_publish_resume_delivers(dev: Dev) -> None:
    filed = dev.chat("file an issue for the flaky login test")
    number = filed["filed_issue_number"]
    task = dev.wait_for(number, "waiting_for_info")
    assert task["pr_url"] is None
    asked = dev.wait_for_message(filed["session"], "needs information")
    # The question comment and the label follow the state change on GitHub.
    _until(
        lambda: all(
            words in _page(filed["filed_issue_url"])
            for words in ("steelframe:needs_human", "less than a sentence")
        ),
        "the question on the issue page",
        dev,
    )
    # Discuss: a session focused on the issue, a Decision drafted there, then Publish.
    discuss = dev.call("POST", "/api/operator/chat/new", {"issue": number})
    drafted = dev.chat(
        "draft a decision: retry the login step twice and log the failing selector",
        session=discuss["id"],
    )
    assert drafted["intent"] == "decide" and drafted["decision_body"], drafted
    published = dev.call(
        "POST",
        "/api/operator/chat/decision",
        {"issue": number, "body": drafted["decision_body"], "session_id": discuss["id"]},
    )
    task = dev.wait_for(number, "delivered")
    pull = _page(task["pr_url"])
    assert "demo runtime" in pull
    assert "retry the login step twice" in pull  # the Decision, in the note's diff
    texts = dev.wait_for_message(filed["session"], "was delivered")
    for link in _links(filed["reply"], drafted["reply"], *asked, *texts) | {
        published["comment_url"]
    }:
        _page(link)
