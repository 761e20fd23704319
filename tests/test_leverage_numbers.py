"""The numbers issue 34 shows agree wherever they are shown: a plan-first task's estimate in
its posted plan and in its JSON (which the GUI and the TUI show) are one estimate, by the
agent that runs it. Real service, GitHub sandbox, RQ worker, bubblewrap where it runs here."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

from sqlalchemy.orm import Session

from bot.lifecycle import budget_ledger, tasks
from bot.lifecycle.plan_flow import PLAN_LABEL
from bot.lifecycle.states import TaskState
from bot.lifecycle.transition import Move, apply
from tests.fakes.coding import command
from tests.fakes.lifecycle import PICKUP, Lifecycle, Make
from tests.fakes.lifecycle import make_fixture as make_fixture  # the `make` fixture
from tests.fakes.sandbox import exchange_dir


def _history(lc: Lifecycle, runs: list[tuple[str, int]]) -> None:
    """Finished tasks of the repository, each run by `agent` for `tokens`."""
    at = datetime.now(UTC) - timedelta(days=2)

    def finished(session: Session) -> None:
        for issue, (agent, tokens) in enumerate(runs, start=900):
            task = tasks.new_task(
                session,
                repo=lc.repo,
                issue=issue,
                title="Make the widget green",
                origin_session=None,
                actor="test",
                clock=lambda: at,
            )
            apply(session, task.id, Move(TaskState.RUNNING, actor="test"), lambda: at)
            apply(session, task.id, Move(TaskState.FAILED, actor="test"), lambda: at)
            stored = tasks.get_task(session, task.id)
            stored.tokens_used, stored.cost_usd = tokens, 0.0
            budget_ledger.record(session, lc.repo, task.id, tokens, 0.0, lambda: at, agent)

    lc.ctx.db.call(finished)


async def test_a_plans_estimate_and_its_tasks_json_say_the_same(make: Make, tmp_path: Path) -> None:
    lc = await make(coding_command=command("planner", exchange_dir(tmp_path)))
    # Two past tasks by this installation's agent, three by another, dearer one.
    _history(lc, [("command", 1_000), ("command", 1_000), *[("codex", 9_000)] * 3])
    made = await lc.github.create_issue(
        lc.repo, title="Make the widget blue", body="It is red.", labels=[PICKUP, PLAN_LABEL]
    )
    await lc.settle()
    await lc.work()
    task = lc.task(made.number)
    assert task.state == TaskState.WAITING_FOR_INFO
    detail = await (await lc.api.get(f"/api/operator/tasks/{task.id}")).json()
    said = detail["estimate"]["text"]
    # The plan on the issue and the task's JSON (the GUI's and the TUI's) give one estimate.
    assert said in (task.question or ""), (said, task.question)
    assert detail["estimate"]["tokens"] == 1_000
