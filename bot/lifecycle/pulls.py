"""The task's pull request: adopted if one is open for its branch, else opened once."""

from __future__ import annotations

import asyncio

from bot.github.issue_records import PullRequest
from bot.lifecycle import egress_blocked, tasks
from bot.lifecycle.repo_tests import DRAFT_NOTE, tests_line
from bot.lifecycle.scope import Run


async def existing_pull(run: Run) -> PullRequest | None:
    """The open pull request of the task's branch (its `draft` as GitHub says), if any."""
    task = run.task
    branch = task.branch or tasks.branch_name(task.issue)
    pulls = await run.github.list_pulls(task.repo, head=branch, state="open")
    if not pulls:
        return None
    pull = pulls[0]
    await asyncio.to_thread(_remember, run, pull)
    return pull


async def open_pull(run: Run, base: str, title: str, summary: str) -> None:
    """Open the pull request once: an existing one for the branch is adopted, not doubled.
    `title` and `summary` are public text already (redacted, no markup)."""
    if await existing_pull(run) is not None:
        return
    task = run.task
    branch = task.branch or tasks.branch_name(task.issue)
    # The command is the repository's text: defanged like the runtime's words.
    tests = run.public_block(tests_line(run.tests, run.ctx.redactor))
    draft = opens_as_draft(run)
    if draft:
        tests += f"\n\n{DRAFT_NOTE}"
    body = (
        f"Fixes #{task.issue}\n\n{summary or 'Changes made by Steelframe.'}\n\n"
        + (f"{tests}\n\n" if tests else "")
        + f"<!-- steelframe-task {task.id} -->"
    )
    if blocked := await run.ctx.db.run(egress_blocked.summary_for, task.id, task.generation):
        # Host names the runtime chose: defanged like its other words.
        body = f"{body}\n\n{run.public_block(blocked)}"
    if run.ctx.policy.coding_agent == "demo":
        title = f"{title} (demo runtime)"
    pull = await run.github.create_pull(
        task.repo, title=title, head=branch, base=base, body=body, draft=draft
    )
    await asyncio.to_thread(_remember, run, pull)


def opens_as_draft(run: Run) -> bool:
    """Red repository tests after the agent's second run make the pull request a draft."""
    return run.tests is not None and not run.tests.passed


def _remember(run: Run, pull: PullRequest) -> None:
    """Keep the task's pull request (number and link), under the run's lease."""
    run.ctx.db.call(
        tasks.touch,
        run.task.id,
        run.ctx.clock,
        fence=run.fence,
        pr_number=pull.number,
        pr_url=pull.html_url,
    )
