"""A run stopped by its task budget (`bot.lifecycle.budget.reached`) does its database work
off its event loop (`Database.run`), as every run step does: no statement executes on a
thread that runs an event loop while `bot/lifecycle/budget.py` is on that thread's stack.
Two ways to reach it: the runtime's usage report crossing the budget, and a budget of zero
(no coding run at all). Real worker, GitHub sandbox, SQLite and PostgreSQL."""

from __future__ import annotations

import pytest

from bot.lifecycle.models import EventKind
from bot.lifecycle.states import TaskState
from tests.fakes.coding import command
from tests.fakes.git import commit_files
from tests.fakes.lifecycle import Make
from tests.fakes.lifecycle import make_fixture as make_fixture  # the `make` fixture
from tests.fakes.loop_statements import statements_on_the_loop

BUDGET_MODULE = "bot/lifecycle/budget.py"


@pytest.mark.parametrize("how", ["crossed", "zero"])
async def test_a_budget_stop_never_runs_a_statement_on_its_event_loop(
    make: Make, any_db_url: str, how: str
) -> None:
    if how == "crossed":
        lc = await make(
            coding_command=command("spend_after_commit"),
            task_max_tokens=2500,
            database_url=any_db_url,
        )
    else:
        lc = await make(coding_command=command("commit"), database_url=any_db_url)
        repo = lc.sandbox.sandbox.world.repo(lc.repo)
        commit_files(repo.git_path, {".steelframe/config.yml": "budget:\n  tokens: 0\n"})
    issue = await lc.open_issue("Spend tokens")
    with statements_on_the_loop(lc.ctx.db.engine, BUDGET_MODULE) as on_the_loop:
        await lc.work()
    task = lc.task(issue)
    history = [(e.kind, e.to_state, e.detail) for e in lc.events(task.id)]
    assert task.state == TaskState.WAITING_FOR_INFO, history
    said = (
        "budget reached: spent 3,000 tokens of 2,500"
        if how == "crossed"
        else ("budget reached: spent 0 tokens of 0")
    )
    assert task.question == said
    limits = [e for e in lc.events(task.id) if e.kind == EventKind.LIMIT_EXCEEDED]
    assert [e.detail for e in limits] == [said]
    assert on_the_loop == []
