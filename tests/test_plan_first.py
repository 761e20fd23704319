"""Plan-first runs (issue 34): the first run is read-only and ends with a plan posted as
the task's question; the Decision approves it (the coding run follows it, the pull
request shows it), edits it (the edited plan is followed), or rejects it (the task ends).
Real service, GitHub sandbox, RQ worker and bubblewrap where it runs here."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

from bot.lifecycle import plan_store
from bot.lifecycle.agents.presets import demo_command
from bot.lifecycle.plan_flow import PLAN_LABEL, verdict
from bot.lifecycle.plan_store import PlanStatus
from bot.lifecycle.prompt import PromptInput, build_prompt
from bot.lifecycle.states import TaskState
from tests.fakes.coding import command
from tests.fakes.lifecycle import DECISION, PICKUP, Lifecycle, Make
from tests.fakes.lifecycle import make_fixture as make_fixture  # the `make` fixture
from tests.fakes.sandbox import exchange_dir

DESCRIBED = "The login page stays blank after a wrong password is entered."


async def _planned(make: Make, tmp_path: Path, **settings: object) -> tuple[Lifecycle, int]:
    lc = await make(coding_command=command("planner", exchange_dir(tmp_path)), **settings)
    issue = await lc.github.create_issue(
        lc.repo, title="Make the widget blue", body="It is red.", labels=[PICKUP, PLAN_LABEL]
    )
    await lc.settle()
    await lc.work()
    return lc, issue.number


def _plan(lc: Lifecycle, issue: int) -> plan_store.Plan | None:
    task = lc.task(issue)
    return lc.ctx.db.call(plan_store.current, task.id, task.generation)


async def test_a_plan_first_task_plans_read_only_and_waits_for_a_decision(
    make: Make, tmp_path: Path
) -> None:
    lc, issue = await _planned(make, tmp_path)
    task = lc.task(issue)
    assert task.state == TaskState.WAITING_FOR_INFO
    assert "Test to run: pytest tests/test_widget.py" in (task.question or "")
    posted = [c["body"] for c in await lc.comments(issue) if "Proposed plan" in c["body"]]
    assert len(posted) == 1 and "Approve plan" in posted[0]
    assert "steelframe:needs_human" in await lc.labels(issue)
    # The plan run changed nothing: no branch content, no pull request; its usage counted.
    assert lc.branch_file("SNEAKY.md", f"steelframe/issue-{issue}") is None
    assert await lc.pulls() == []
    assert task.tokens_used == 400
    plan = _plan(lc, issue)
    assert plan is not None and plan.status == PlanStatus.PROPOSED
    attempts = (exchange_dir(tmp_path) / "plan-attempts.txt").read_text()
    if lc.settings.coding_sandbox == "bwrap":  # the mount itself refuses the writes
        assert "write: blocked" in attempts and "commit: blocked" in attempts


async def test_an_approved_plan_is_pinned_into_the_coding_run_and_the_pull_request(
    make: Make, tmp_path: Path
) -> None:
    lc, issue = await _planned(make, tmp_path)
    await lc.comment_as("maintainer", issue, f"{DECISION}\nGo ahead.", "write")
    await lc.work()
    task = lc.task(issue)
    assert task.state == TaskState.DELIVERED
    change = lc.branch_file("CHANGE.md", f"steelframe/issue-{issue}") or ""
    assert "<plan>" in change and "Approach: make the widget blue" in change
    (pull,) = await lc.pulls()
    assert "### Approved plan" in pull["body"] and "Approach: make the widget blue" in pull["body"]
    plan = _plan(lc, issue)
    assert plan is not None and plan.status == PlanStatus.APPROVED and not plan.edited


async def test_an_edited_plan_becomes_the_brief(make: Make, tmp_path: Path) -> None:
    lc, issue = await _planned(make, tmp_path)
    edited = "Files to change: theme.css\nApproach: use the theme's blue, not a new colour"
    await lc.comment_as("maintainer", issue, f"{DECISION}\n{edited}", "write")
    await lc.work()
    assert lc.task(issue).state == TaskState.DELIVERED
    change = lc.branch_file("CHANGE.md", f"steelframe/issue-{issue}") or ""
    assert "use the theme's blue" in change and "make the widget blue" not in change
    (pull,) = await lc.pulls()
    assert "Approved plan (edited by the operator)" in pull["body"]
    assert "use the theme's blue" in pull["body"]


async def test_a_rejected_plan_ends_the_task_with_nothing_pushed(
    make: Make, tmp_path: Path
) -> None:
    lc, issue = await _planned(make, tmp_path)
    await lc.comment_as("maintainer", issue, f"{DECISION}\nReject.", "write")
    await lc.work()
    task = lc.task(issue)
    assert task.state == TaskState.TERMINATED
    assert lc.branch_file("CHANGE.md", f"steelframe/issue-{issue}") is None
    assert await lc.pulls() == []
    assert any("plan was rejected" in c["body"] for c in await lc.comments(issue))
    plan = _plan(lc, issue)
    assert plan is not None and plan.status == PlanStatus.REJECTED


async def test_a_redelivered_approval_starts_one_coding_run(make: Make, tmp_path: Path) -> None:
    lc, issue = await _planned(make, tmp_path)
    await lc.comment_as("maintainer", issue, f"{DECISION}\nGo ahead.", "write")
    task = lc.task(issue)
    # The same Decision comment reaching the service again (a redelivery): no second run.
    again = await lc.resumes.resume(
        lc.repo,
        issue,
        comment_id=task.decision_comment_id or 0,
        author="maintainer",
        body=f"{DECISION}\nGo ahead.",
        cause="test:redelivery",
    )
    assert not again.resumed and again.reason == "this Decision was already applied"
    assert len(lc.queued_jobs()) == 1
    await lc.work()
    assert lc.task(issue).state == TaskState.DELIVERED
    assert len(await lc.pulls()) == 1


async def test_the_repository_setting_makes_every_task_plan_first(
    make: Make, tmp_path: Path
) -> None:
    lc = await make(coding_command=command("planner", exchange_dir(tmp_path)), plan_first=True)
    issue = await lc.open_issue()
    await lc.work()
    assert lc.task(issue).state == TaskState.WAITING_FOR_INFO
    assert await lc.pulls() == []


def test_only_the_exact_words_approve_or_reject() -> None:
    assert verdict("Go ahead.") == verdict("  APPROVE plan! ") == PlanStatus.APPROVED
    assert verdict("reject") == verdict("Reject the plan.") == PlanStatus.REJECTED
    # Anything else is an edited plan, even when it starts like an approval.
    assert verdict("Go ahead, but do not touch the API") is None
    assert verdict("") is None


def test_the_demo_runtime_plans_in_plan_mode_and_writes_nothing(tmp_path: Path) -> None:
    prompt = build_prompt(
        PromptInput(
            repo="o/r", issue=7, title="Fix the login", body=DESCRIBED, branch="steelframe/7"
        )
    )
    env = {"STEELFRAME_ISSUE": "7", "STEELFRAME_MODE": "plan", "PATH": "/usr/bin:/bin"}
    done = subprocess.run(
        demo_command(), input=prompt, cwd=tmp_path, env=env, capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout.splitlines()[-1])
    assert result["status"] == "done"
    for heading in ("Files to change", "Approach", "Risks", "Test to run", "Estimate"):
        assert f"{heading}:" in result["summary"]
    assert "Fix the login" in result["summary"]
    assert list(tmp_path.iterdir()) == []  # the plan run wrote nothing
