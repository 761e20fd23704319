"""A filing made by the operator's explicit action (the TUI's `y`, the GUI's File button,
`POST /api/operator/chat/file`) stays in its session: the history read after a reload shows
"Filed as #N", once however often the same filing is sent. Before, only the live answer
said it, and a reload lost it."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from bot.runtimes.base import Delta
from tests.conftest import SANDBOX_REPO, ApiClient, GitHubSandbox
from tests.fakes.runtimes import ScriptedRuntime

PROPOSING = (
    "The cache looks stale.\n"
    'STEELFRAME_META: {"intent": "file_work", "title": "Purge the cache", "body": "Stale."}'
)


def issues(sandbox: GitHubSandbox) -> list[Any]:
    repo = sandbox.sandbox.world.repo(SANDBOX_REPO)
    return [issue for issue in repo.issues.values() if not issue.is_pull]


async def history(api: ApiClient, session: str) -> list[dict[str, Any]]:
    answer = await api.get("/api/operator/chat", params={"session": session})
    assert answer.status == 200
    return list((await answer.json())["messages"])


async def test_a_proposal_filed_by_the_file_action_shows_in_the_history(
    api_factory: Any, github_sandbox: GitHubSandbox, tmp_path: Path, redis_url: str
) -> None:
    runtime = ScriptedRuntime([[Delta(PROPOSING)]])
    api = await api_factory(
        github_sandbox.settings(tmp_path, redis_url=redis_url), runtimes=lambda agent: runtime
    )
    done = await (await api.post("/api/operator/chat", json={"message": "why so slow?"})).json()
    session = done["session"]

    filed = await api.post("/api/operator/chat/file", json={"session": session})

    assert filed.status == 201
    number = (await filed.json())["filed_issue_number"]
    [issue] = issues(github_sandbox)
    assert issue.number == number
    messages = await history(api, session)
    assert [m["role"] for m in messages] == ["user", "assistant", "assistant"]
    note = messages[-1]
    assert note["content"].startswith(f"Filed as #{number}: ")
    assert note["meta"]["kind"] == "filed" and note["meta"]["issue"] == number


async def test_an_explicit_filing_sent_twice_is_noted_once_in_the_active_session(
    api_factory: Any, github_sandbox: GitHubSandbox, tmp_path: Path, redis_url: str
) -> None:
    runtime = ScriptedRuntime([[Delta("Hello.")]])
    api = await api_factory(
        github_sandbox.settings(tmp_path, redis_url=redis_url), runtimes=lambda agent: runtime
    )
    done = await (await api.post("/api/operator/chat", json={"message": "hello"})).json()

    first = await api.post("/api/operator/chat/file", json={"title": "Flaky login test"})
    again = await api.post("/api/operator/chat/file", json={"title": " Flaky login test "})

    assert (first.status, again.status) == (201, 200)
    [issue] = issues(github_sandbox)
    url = (await first.json())["filed_issue_url"]
    notes = [m for m in await history(api, done["session"]) if m["content"].startswith("Filed")]
    assert [m["content"] for m in notes] == [f"Filed as #{issue.number}: {url}"]
