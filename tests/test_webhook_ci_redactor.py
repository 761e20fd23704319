"""The CI handler hides the secrets of the settings the service started with: its redactor
is built once per process, not from the environment on every CI event (which also read the
App key's file each time). Real service, RQ worker and GitHub sandbox."""

from __future__ import annotations

import pytest

from bot.lifecycle.ci_models import CiFix
from tests.fakes.coding import command
from tests.fakes.lifecycle import Make
from tests.fakes.lifecycle import make_fixture as make_fixture  # the `make` fixture
from tests.fakes.pulls import delivered_pull
from tests.test_lifecycle_ci_fix import LOG, fail_head

SECRET = "ci-deploy-0f3a9c27e1"


async def test_ci_evidence_hides_the_secret_the_service_started_with(
    make: Make, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("STEELFRAME_TEST_DEPLOY_TOKEN", SECRET)
    lc = await make(
        coding_command=command("echo"),
        coding_env_passthrough=("STEELFRAME_TEST_DEPLOY_TOKEN",),
    )
    issue, number = await delivered_pull(lc)
    # After start-up the variable is gone from this process's environment: what the service
    # hides is what it loaded, as every other setting is.
    monkeypatch.delenv("STEELFRAME_TEST_DEPLOY_TOKEN")
    await fail_head(lc, number, log=f"{LOG}E   deploy token {SECRET} refused\n")
    task = lc.task(issue)
    (evidence,) = lc.ctx.db.call(
        lambda s: [row.evidence for row in s.query(CiFix).filter(CiFix.task_id == task.id)]
    )
    assert "AssertionError: red != blue" in evidence  # the job log's tail, read at delivery
    assert "deploy token" in evidence and SECRET not in evidence, evidence
