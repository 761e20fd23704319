"""GET /api/operator/tasks/{id}/log: the private, redacted runtime log, for operators only;
and the sandbox's mode (with its warning when isolation is off) on /healthz and the board."""

from __future__ import annotations

import pytest

from tests.fakes.coding import command
from tests.fakes.lifecycle import PATIENCE_SECONDS, Make, wait_for
from tests.fakes.lifecycle import make_fixture as make_fixture  # the `make` fixture


async def test_the_log_of_a_task_lists_its_runs_for_operators_only(make: Make) -> None:
    lc = await make(coding_command=command("commit"))
    issue = await lc.open_issue()
    await wait_for(lc.queued_jobs, within=PATIENCE_SECONDS)
    await lc.work()
    task_id = lc.task(issue).id
    response = await lc.api.get(f"/api/operator/tasks/{task_id}/log")
    assert response.status == 200
    body = await response.json()
    assert lc.task(issue).state == "delivered"
    (run,) = body["runs"]
    assert body["task"] == task_id and run["attempt"] == 1 and run["status"] == "done"
    assert '"type": "result"' in run["text"]
    anonymous = await lc.api.raw.get(f"/api/operator/tasks/{task_id}/log")
    assert anonymous.status == 401


@pytest.mark.parametrize(
    ("path", "status", "field"),
    [
        ("/api/operator/tasks/abc/log", 400, "id"),
        ("/api/operator/tasks/0/log", 400, "id"),
        ("/api/operator/tasks/1/log?runs=0", 400, "runs"),
        ("/api/operator/tasks/1/log?runs=x", 400, "runs"),
        ("/api/operator/tasks/999/log", 404, None),
    ],
)
async def test_bad_log_requests_are_refused(
    make: Make, path: str, status: int, field: str | None
) -> None:
    lc = await make()
    response = await lc.api.get(path)
    assert response.status == status
    error = await response.json()
    assert {"error", "code"} <= set(error)
    if field is not None:
        assert error["detail"]["field"] == field


async def test_isolation_turned_off_shows_on_healthz_and_the_board(make: Make) -> None:
    lc = await make(coding_sandbox="off")
    health = await (await lc.api.raw.get("/healthz")).json()
    assert health["coding_sandbox"]["mode"] == "off"
    assert "without isolation" in health["coding_sandbox"]["warning"]
    board = await (await lc.api.get("/api/operator/board")).json()
    assert board["coding_sandbox"] == health["coding_sandbox"]


async def test_with_the_sandbox_on_there_is_no_warning(make: Make) -> None:
    lc = await make(coding_sandbox="bwrap")
    health = await (await lc.api.raw.get("/healthz")).json()
    assert health["coding_sandbox"] == {"mode": "bwrap", "network": "allowlist", "warning": None}
