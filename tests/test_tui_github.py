"""Publish (`P`) and filing (`y`) from the TUI, through the real service to the GitHub sandbox."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from textual.pilot import Pilot

from bot.config import Settings
from bot.dialogue.trailer import Intent, Trailer, render_trailer
from tests.conftest import SANDBOX_REPO, ApiClient, GitHubSandbox
from tests.fakes.held_press import press_again_while_held
from tests.fakes.runtimes import ScriptedRuntime, reply
from tests.fakes.tui import SIZE, HeldAnswers, notices, ready, send, status, tui, until
from tests.fakes.tui_openings import draft_decision
from tui_client.app import SteelframeApp

MARKER = "<!-- steelframe-decision -->"


async def sandbox_get(sandbox: GitHubSandbox, api: ApiClient, path: str) -> Any:
    """Read GitHub as a person would (REST on the sandbox with a user token)."""
    token = sandbox.user_token("reader", "read")
    async with api.raw.session.get(
        f"{sandbox.url}/repos/{SANDBOX_REPO}{path}", headers={"Authorization": f"token {token}"}
    ) as response:
        assert response.status == 200, await response.text()
        return await response.json()


async def _issue(api: ApiClient, title: str, body: str) -> int:
    assert api.services.github is not None
    issue = await api.services.github.create_issue(SANDBOX_REPO, title=title, body=body, labels=[])
    return issue.number


async def _decision_drafted(
    pilot: Pilot[None], app: SteelframeApp, number: int, message: str
) -> None:
    """A Discuss session on issue `number` whose turn drafted a Decision (`P` publishes it)."""
    await draft_decision(pilot, app, number, message)
    assert status(app) == f"Chat · Decision draft · P publish to #{number}"


def _proposing(title: str, body: str, said: str) -> ScriptedRuntime:
    """A model whose one reply (`said`) proposes work: `y` files it as an issue."""
    proposal = Trailer(intent=Intent.PROPOSE_WORK, title=title, body=body)
    return ScriptedRuntime([reply(said, trailer=render_trailer(proposal))])


async def test_capital_p_publishes_the_decision_once_with_the_marker(
    github_sandbox: GitHubSandbox, github_service: ApiClient
) -> None:
    api = github_service
    number = await _issue(api, "Pick a deploy strategy", "Blue-green or rolling?")
    app = tui(api)
    async with app.run_test(size=SIZE) as pilot:
        await _decision_drafted(pilot, app, number, "draft a decision: use blue-green deploys")
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
    runtime = _proposing(
        "Add a retry budget to CI", "CI retries forever.", "We could cap CI retries."
    )
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
    number = await _issue(api, "Pick a region", "East or west?")
    app = tui(api)
    async with app.run_test(size=SIZE) as pilot:
        await _decision_drafted(pilot, app, number, "draft a decision: use the east region")
        await press_again_while_held(
            pilot, app, held, "P", answered=lambda n: "Published" in n, what="publish"
        )
    comments = await sandbox_get(github_sandbox, api, f"/issues/{number}/comments")
    assert len(comments) == 1


async def test_y_pressed_again_while_the_proposal_is_filed_files_it_once(
    github_sandbox: GitHubSandbox, api_factory: Any, tmp_path: Path
) -> None:
    """As `P`: a second `y` while the filing's answer is held sends nothing."""
    runtime = _proposing("Cap the log size", "Logs fill the disk.", "We could cap the logs.")
    held = HeldAnswers("/api/operator/chat/file", method="POST")
    api = await api_factory(
        github_sandbox.settings(tmp_path), runtimes=lambda agent: runtime, plugins=held.plugins()
    )
    app = tui(api)
    async with app.run_test(size=SIZE) as pilot:
        await ready(pilot, app)
        await send(pilot, app, "The logs fill the disk.")
        assert status(app) == 'Chat · Proposal "Cap the log size" · press y to file'
        await press_again_while_held(
            pilot, app, held, "y", answered=lambda n: n.startswith("Filed #"), what="filing"
        )
    issues = await sandbox_get(github_sandbox, api, "/issues")
    assert [i["title"] for i in issues] == ["Cap the log size"]
