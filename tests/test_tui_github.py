"""Publish (`P`) and filing (`y`) from the TUI, through the real service to the GitHub sandbox."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from bot.dialogue.trailer import Intent, Trailer, render_trailer
from tests.conftest import SANDBOX_REPO, ApiClient, GitHubSandbox
from tests.fakes.runtimes import ScriptedRuntime, reply
from tests.fakes.tui import SIZE, notices, ready, send, status, tui, until

MARKER = "<!-- steelframe-decision -->"


async def sandbox_get(sandbox: GitHubSandbox, api: ApiClient, path: str) -> Any:
    """Read GitHub as a person would (REST on the sandbox with a user token)."""
    token = sandbox.user_token("reader", "read")
    async with api.raw.session.get(
        f"{sandbox.url}/repos/{SANDBOX_REPO}{path}", headers={"Authorization": f"token {token}"}
    ) as response:
        assert response.status == 200, await response.text()
        return await response.json()


async def test_capital_p_publishes_the_decision_once_with_the_marker(
    github_sandbox: GitHubSandbox, github_service: ApiClient
) -> None:
    api = github_service
    assert api.services.github is not None
    issue = await api.services.github.create_issue(
        SANDBOX_REPO, title="Pick a deploy strategy", body="Blue-green or rolling?", labels=[]
    )
    number = issue.number
    app = tui(api)
    async with app.run_test(size=SIZE) as pilot:
        await ready(pilot, app)
        app.chat.start_discuss(number)
        await until(pilot, lambda: app.chat.state.focus == number, "the Discuss session")
        await send(pilot, app, "draft a decision: use blue-green deploys")
        assert status(app) == f"Chat · Decision draft · P publish to #{number}"
        assert await sandbox_get(github_sandbox, api, f"/issues/{number}/comments") == []
        await pilot.press("P")
        await until(
            pilot,
            lambda: any("Published" in n for n in notices(app)),
            lambda: f"the publish, got {notices(app)}",
        )
        assert notices(app)[-1].startswith(f"Published the Decision to #{number} http")
        assert status(app) == f"Chat · Discuss #{number} · focused on #{number}"
        await pilot.press("P")  # the draft is gone: now `P` is just a letter
        assert app.chat.composer.value == "P"
    comments = await sandbox_get(github_sandbox, api, f"/issues/{number}/comments")
    assert len(comments) == 1
    assert MARKER in comments[0]["body"] and "use blue-green deploys" in comments[0]["body"]


async def test_y_files_the_pending_proposal_by_its_title(
    github_sandbox: GitHubSandbox, api_factory: Any, tmp_path: Path
) -> None:
    proposal = Trailer(
        intent=Intent.PROPOSE_WORK, title="Add a retry budget to CI", body="CI retries forever."
    )
    runtime = ScriptedRuntime([reply("We could cap CI retries.", trailer=render_trailer(proposal))])
    api = await api_factory(github_sandbox.settings(tmp_path), runtimes=lambda agent: runtime)
    app = tui(api)
    async with app.run_test(size=SIZE) as pilot:
        await ready(pilot, app)
        await send(pilot, app, "CI keeps retrying failed jobs forever.")
        assert app.chat.state.intent == "propose_work"
        assert status(app) == 'Chat · Proposal "Add a retry budget to CI" · press y to file'
        assert await sandbox_get(github_sandbox, api, "/issues") == []  # proposed, not filed
        await pilot.press("y")
        await until(
            pilot,
            lambda: any(n.startswith("Filed #") for n in notices(app)),
            lambda: f"filing, got {notices(app)}",
        )
        assert "press y to file" not in status(app)
        await pilot.press("y")  # nothing pending any more: a letter
        assert app.chat.composer.value == "y"
    issues = await sandbox_get(github_sandbox, api, "/issues")
    assert [i["title"] for i in issues] == ["Add a retry budget to CI"]
    assert "steelframe:from-tui" in [label["name"] for label in issues[0]["labels"]]
