"""A terminated task stays terminated: a run that ends after the operator stopped it (the
second before its watcher notices) neither requeues, fails nor delivers it."""

from __future__ import annotations

from typing import Any

import pytest

from bot.lifecycle.finish import finish_delivered, finish_failed
from bot.lifecycle.states import TaskState
from bot.lifecycle.transition import Move, apply
from tests.fakes.lifecycle import Lifecycle, Make
from tests.fakes.lifecycle import make_fixture as make_fixture  # the `make` fixture


async def _terminated_while_running(lc: Lifecycle) -> int:
    issue = await lc.open_issue("Make the widget blue")
    task_id = lc.task(issue).id
    lc.ctx.db.call(apply, task_id, Move(TaskState.RUNNING, actor="worker:test"))
    await lc.terminations.terminate(task_id, actor="operator")
    return issue


@pytest.mark.parametrize("ending", ["retry", "failed", "delivered"])
async def test_a_run_ending_after_terminate_leaves_the_task_terminated(
    make: Make, ending: str
) -> None:
    lc = await make()
    issue = await _terminated_while_running(lc)
    task_id = lc.task(issue).id
    jobs = lc.queued_jobs()
    assert lc.ctx.github is not None
    async with lc.ctx.github() as github:
        result: Any
        if ending == "delivered":
            result = await finish_delivered(lc.ctx, github, task_id, "worker:test", summary="")
        else:
            result = await finish_failed(
                lc.ctx, github, task_id, "worker:test", error="boom", retry=ending == "retry"
            )
    assert result == "stopped: task became terminated"
    assert lc.task(issue).state == TaskState.TERMINATED
    assert lc.queued_jobs() == jobs  # no new attempt was queued
