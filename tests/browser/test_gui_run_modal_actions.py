"""The run modal's actions stay in view: a run whose private log comes in after the modal
opened (a long one, as every finished run has) keeps Close, Discuss and Terminate on screen
on a phone, the focus on Close where the operator sees it, not pushed below a screen of log
they must scroll past to find them (docs/gui.md "Board")."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

from bot.clock import utcnow
from bot.lifecycle.models import Task, TaskEvent
from tests.browser.conftest import GuiFactory
from tests.browser.test_gui_layout import PHONE, clickable
from tests.conftest import ApiClient, make_settings

LOG = {
    "runs": [
        {
            "attempt": 1,
            "status": "done",
            "at": "2026-01-05T10:00:00+00:00",
            "text": "\n".join(f"[stdout] step {n}: compiled and tested" for n in range(120)),
        }
    ]
}


def seed_run(api: ApiClient, *, issue: int, events: int) -> None:
    """A running task and the events of its run so far (each a line or two in the modal)."""

    def seed(db: Any) -> None:
        now = utcnow()
        task = Task(
            repo="steelframe-dev/demo",
            issue=issue,
            title="A run with a long log",
            state="running",
            created_at=now,
            updated_at=now,
        )
        db.add(task)
        db.flush()
        for n in range(events):
            db.add(
                TaskEvent(
                    task_id=task.id,
                    kind="pickup_ignored",
                    actor="webhook:issues.labeled",
                    detail=f"label {n} added: the task is already running",
                    at=now,
                )
            )

    api.services.db.call(seed)


async def test_the_run_modal_keeps_its_actions_in_view_when_a_long_log_comes_in(
    api_factory: Any, tmp_path: Path, gui_factory: GuiFactory
) -> None:
    api = await api_factory(make_settings(tmp_path))
    seed_run(api, issue=21, events=12)  # the modal fits the phone's screen until the log
    gui = await gui_factory(api, viewport=PHONE)
    page = gui.page
    asked: asyncio.Queue[Any] = asyncio.Queue()
    await page.route("**/api/operator/tasks/*/log*", asked.put)
    await gui.screen("board")
    await page.click(".card[data-issue='21'] .card-open")
    await page.locator("#run-modal").wait_for(state="visible")
    await (await asked.get()).fulfill(
        status=200, content_type="application/json", body=json.dumps(LOG)
    )
    await page.locator("#run-modal pre.log").wait_for()
    assert await page.evaluate("() => document.activeElement.id") == "run-close"
    for control in (
        "#run-close",
        "#run-actions button.danger",
        "#run-actions button:not(.danger)",
    ):
        await clickable(gui, control)
