"""The coding run gets its environment from the worker's, read once when the worker started
(`LifecycleContext.environment`, as setup does: tests/test_worker_environment.py): a variable
changed in the worker's process after its start does not reach the coding runtime. The run
once read `os.environ` again on every job (`sandbox.wrap` without `base_env`)."""

from __future__ import annotations

import pytest

from tests.fakes.coding import command
from tests.fakes.lifecycle import Make
from tests.fakes.lifecycle import make_fixture as make_fixture  # the `make` fixture


async def test_a_variable_changed_after_the_worker_started_does_not_reach_the_coding_run(
    make: Make, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TZ", "UTC")  # the worker starts with it (TZ passes the allowlist)
    lc = await make(coding_command=command("say_env", "TZ"))
    monkeypatch.setenv("TZ", "Pacific/Job_Time")  # the process's, after the worker's start
    issue = await lc.open_issue()
    await lc.work()
    task = lc.task(issue)
    assert task.state == "delivered", task.last_error
    assert task.summary == "TZ=UTC"
