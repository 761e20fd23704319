"""The presets with the real CLIs (pinned, installed from npm into a cache), headless against
a loopback fake model server speaking the provider's streaming wire format, end to end
through the lifecycle: the real agent edits the worktree and the task delivers."""

from __future__ import annotations

import asyncio
import os
import shutil
import tempfile
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest

from bot.lifecycle.agents.presets import Agent
from bot.lifecycle.models import TaskLog
from bot.lifecycle.states import TaskState
from tests.fakes.anthropic_server import FakeAnthropic, answer, tool_round
from tests.fakes.lifecycle import Make
from tests.fakes.lifecycle import make_fixture as make_fixture  # the `make` fixture
from tests.fakes.openai_server import FakeOpenAI
from tests.fakes.openai_server import answer as chat_answer
from tests.fakes.real_agents import cache_root, real_agent_bin, real_aider_bin
from tests.fakes.responses_server import FakeResponses, Run, Say
from tests.fakes.served import served

KEY = "sk-ant-test-key"
MODEL = "claude-sonnet-4-5"


def _endpoint(url: str) -> str:
    """The fake server's host:port, which the run's egress proxy may reach although it is
    on loopback (STEELFRAME_EGRESS_PRIVATE)."""
    return urlsplit(url).netloc


def kept_log(lc: Any, task_id: int) -> str:
    """The task's private run logs: the adapter's protocol lines, as the worker kept them."""
    rows = lc.ctx.db.call(lambda s: s.query(TaskLog).filter(TaskLog.task_id == task_id).all())
    return "\n".join(row.text for row in rows)


@pytest.fixture
async def anthropic() -> AsyncIterator[tuple[FakeAnthropic, str]]:
    fake = FakeAnthropic(api_key=KEY)
    async with served(fake.app()) as port:
        yield fake, f"http://127.0.0.1:{port}"


@pytest.fixture
def data_outside_tmp() -> Iterator[Path]:
    """A data directory outside /tmp: Codex refuses to create the helper binaries of its
    Linux sandbox under a temporary directory, and its commands then cannot start."""
    cache_root().mkdir(parents=True, exist_ok=True)
    folder = Path(tempfile.mkdtemp(prefix="data-", dir=cache_root()))
    try:
        yield folder
    finally:
        shutil.rmtree(folder, ignore_errors=True)


@pytest.fixture
async def responses() -> AsyncIterator[tuple[FakeResponses, str]]:
    fake = FakeResponses(api_key="sk-codex-test")
    async with served(fake.app()) as port:
        yield fake, f"http://127.0.0.1:{port}/v1"


@pytest.mark.slow
async def test_real_claude_code_delivers_through_the_preset(
    make: Make, anthropic: tuple[FakeAnthropic, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    binaries = real_agent_bin(Agent.CLAUDE)
    fake, url = anthropic
    # Claude Code asks for extended thinking: each answer starts with a signed thinking block.
    bash = {"command": "echo hello > hello.txt", "description": "Create hello.txt"}
    fake.enqueue(
        MODEL,
        tool_round(("Bash", bash), text="I'll create the file.", thinking="Use the shell."),
        answer("Done: created hello.txt.", thinking="It is done."),
    )
    monkeypatch.setenv("PATH", f"{binaries}:{os.environ['PATH']}")
    monkeypatch.setenv("ANTHROPIC_API_KEY", KEY)
    monkeypatch.setenv("ANTHROPIC_BASE_URL", url)
    monkeypatch.setenv("CLAUDE_CODE_MAX_RETRIES", "0")
    values: dict[str, Any] = {"coding_agent": "claude", "coding_model": MODEL}
    lc = await make(**values, task_time_limit=120, egress_private=(_endpoint(url),))
    issue = await lc.open_issue("Say hello", "Create hello.txt containing the word hello.")
    await lc.work()
    task = lc.task(issue)
    assert task.state == TaskState.DELIVERED, [e.detail for e in lc.events(task.id)]
    assert lc.branch_file("hello.txt", f"steelframe/issue-{issue}") == "hello\n"
    assert task.runtime_session and task.cost_usd > 0 and task.tokens_used > 0
    assert len(fake.requests) == 2 and fake.requests[0].headers.get("x-api-key") == KEY
    # The worker's prompt reached the model, the issue text marked as data.
    first = str(fake.requests[0].body["messages"])
    assert "Create hello.txt containing the word hello." in first
    home = Path(lc.settings.data_dir, "agent-homes", f"task-{task.id}")
    assert (await asyncio.to_thread(os.listdir, home / ".claude")) != []  # sessions kept
    # Every line the real CLI printed fit the Structs of its format (a malformed one is said).
    kept = kept_log(lc, task.id)
    assert '[stdout] {"type": "progress", "action": "command", "name": "Bash"}' in kept
    assert "printed a malformed" not in kept


@pytest.mark.slow
async def test_real_codex_cli_delivers_through_the_preset(
    make: Make,
    responses: tuple[FakeResponses, str],
    monkeypatch: pytest.MonkeyPatch,
    data_outside_tmp: Path,
) -> None:
    binaries = real_agent_bin(Agent.CODEX)
    fake, url = responses
    fake.enqueue(
        [Say("I'll create the file."), Run("echo hello > hello.txt")],
        [Say("Done: created hello.txt.")],
    )
    monkeypatch.setenv("PATH", f"{binaries}:{os.environ['PATH']}")
    monkeypatch.setenv("CODEX_API_KEY", "sk-codex-test")
    monkeypatch.setenv("OPENAI_BASE_URL", url)
    prices = {"gpt-5-codex": {"input": 1.25, "output": 10.0}}
    lc = await make(
        coding_agent="codex",
        coding_model="gpt-5-codex",
        model_prices=prices,
        task_time_limit=120,
        data_dir=data_outside_tmp,
        egress_private=(_endpoint(url),),
    )
    issue = await lc.open_issue("Say hello", "Create hello.txt containing the word hello.")
    await lc.work()
    task = lc.task(issue)
    assert task.state == TaskState.DELIVERED, [e.detail for e in lc.events(task.id)]
    assert lc.branch_file("hello.txt", f"steelframe/issue-{issue}") == "hello\n"
    # Two model calls of 1,200 input and 60 output tokens each, priced per million.
    assert task.tokens_used == 2 * (1200 + 60)
    assert task.cost_usd == pytest.approx((2400 * 1.25 + 120 * 10.0) / 1e6)
    assert task.runtime_session  # the thread id, for `codex exec resume`
    outputs = [i for i in fake.requests[1]["input"] if i.get("type") == "function_call_output"]
    assert outputs and "exited with code 0" in outputs[0]["output"]
    kept = kept_log(lc, task.id)
    assert '[stdout] {"type": "progress", "action": "command", "name": "shell"}' in kept
    assert "printed a malformed" not in kept


# aider's diff edit format: a SEARCH/REPLACE block with an empty SEARCH creates the file.
AIDER_EDIT = (
    "I'll create it.\n\nhello.txt\n```\n<<<<<<< SEARCH\n=======\nhello\n>>>>>>> REPLACE\n```\n"
)


@pytest.mark.slow
async def test_real_aider_delivers_through_the_preset(
    make: Make, monkeypatch: pytest.MonkeyPatch
) -> None:
    binaries = real_aider_bin()
    fake = FakeOpenAI(api_key="sk-openai-test", unstreamed=True)  # --no-stream
    fake.enqueue("gpt-4o", chat_answer(AIDER_EDIT, usage=(2100, 120)))
    async with served(fake.app()) as port:
        monkeypatch.setenv("PATH", f"{binaries}:{os.environ['PATH']}")
        monkeypatch.setenv("OPENAI_API_KEY", "sk-openai-test")
        url = f"http://127.0.0.1:{port}/v1"
        monkeypatch.setenv("OPENAI_API_BASE", url)
        lc = await make(
            coding_agent="aider",
            coding_model="gpt-4o",
            task_time_limit=180,
            egress_private=(_endpoint(url),),
        )
        issue = await lc.open_issue("Say hello", "Create hello.txt containing the word hello.")
        await lc.work()
    task = lc.task(issue)
    assert task.state == TaskState.DELIVERED, [e.detail for e in lc.events(task.id)]
    branch = f"steelframe/issue-{issue}"
    assert lc.branch_file("hello.txt", branch) == "hello\n"
    assert lc.branch_file(".gitignore", branch) is None  # --no-gitignore
    tree = lc.branch_file("", branch) or ""
    assert ".aider" not in tree  # neither its history nor its tags cache
    # aider's own usage line: 2.1k sent, 120 received, its cost for gpt-4o.
    assert task.tokens_used == 2100 + 120 and task.cost_usd > 0
    assert len(fake.requests) == 1 and fake.requests[0].body.get("stream") in (None, False)
