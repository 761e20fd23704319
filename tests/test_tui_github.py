"""Publish (`P`) and filing (`y`) from the TUI, through the real service to the GitHub sandbox."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from bot.config import Settings
from bot.dialogue.trailer import Intent, Trailer, render_trailer
from tests.conftest import SANDBOX_REPO, ApiClient, GitHubSandbox
from tests.fakes.runtimes import ScriptedRuntime, reply
from tests.fakes.tui import SIZE, HeldAnswers, notices, ready, send, status, tui, until

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


async def test_p_pressed_again_while_the_decision_publishes_publishes_it_once(
    github_sandbox: GitHubSandbox, api_factory: Any, github_settings: Settings
) -> None:
    """The publish's answer held (the comment is posted: the service has answered, the TUI
    waits for it): a second `P` meanwhile, while the draft still shows, posted it again. Its
    worker was exclusive, so the second press cancelled the first's wait (not what the
    service did) and sent a new request under a new key; now it is not sent at all."""
    held = HeldAnswers("/api/operator/chat/decision", method="POST")
    api = await api_factory(github_settings, plugins=held.plugins())
    assert api.services.github is not None
    issue = await api.services.github.create_issue(
        SANDBOX_REPO, title="Pick a region", body="East or west?", labels=[]
    )
    number = issue.number
    app = tui(api)
    async with app.run_test(size=SIZE) as pilot:
        await ready(pilot, app)
        app.chat.start_discuss(number)
        await until(pilot, lambda: app.chat.state.focus == number, "the Discuss session")
        await send(pilot, app, "draft a decision: use the east region")
        assert status(app) == f"Chat · Decision draft · P publish to #{number}"
        held.holding = True
        await pilot.press("P")
        await until(pilot, lambda: held.held == 1, "the publish's answer to be held")
        await pilot.press("P")
        assert app.chat.composer.value == ""  # the key was publish's, not a letter
        held.release.set()
        await until(
            pilot,
            lambda: any("Published" in n for n in notices(app)),
            lambda: f"the publish, got {notices(app)}",
        )
        await ready(pilot, app)
        assert held.asked == 1
    comments = await sandbox_get(github_sandbox, api, f"/issues/{number}/comments")
    assert len(comments) == 1


async def test_y_pressed_again_while_the_proposal_is_filed_files_it_once(
    github_sandbox: GitHubSandbox, api_factory: Any, tmp_path: Path
) -> None:
    """As `P`: a second `y` while the filing's answer is held sends nothing."""
    proposal = Trailer(
        intent=Intent.PROPOSE_WORK, title="Cap the log size", body="Logs fill the disk."
    )
    runtime = ScriptedRuntime([reply("We could cap the logs.", trailer=render_trailer(proposal))])
    held = HeldAnswers("/api/operator/chat/file", method="POST")
    api = await api_factory(
        github_sandbox.settings(tmp_path), runtimes=lambda agent: runtime, plugins=held.plugins()
    )
    app = tui(api)
    async with app.run_test(size=SIZE) as pilot:
        await ready(pilot, app)
        await send(pilot, app, "The logs fill the disk.")
        assert status(app) == 'Chat · Proposal "Cap the log size" · press y to file'
        held.holding = True
        await pilot.press("y")
        await until(pilot, lambda: held.held == 1, "the filing's answer to be held")
        await pilot.press("y")
        assert app.chat.composer.value == ""  # the key was filing's, not a letter
        held.release.set()
        await until(
            pilot,
            lambda: any(n.startswith("Filed #") for n in notices(app)),
            lambda: f"filing, got {notices(app)}",
        )
        await ready(pilot, app)
        assert held.asked == 1
    issues = await sandbox_get(github_sandbox, api, "/issues")
    assert [i["title"] for i in issues] == ["Cap the log size"]
