"""A signed delivery about a repository the App has no installation for is stored and
ignored: no handler runs, no task is made (issue 35). So is one naming an installation that
does not serve its repository."""

from __future__ import annotations

import json
from typing import Any

from sqlalchemy import select

from bot.lifecycle.models import Task
from tests.conftest import GITHUB_DATA, webhook_headers
from tests.fakes.lifecycle import PICKUP, Lifecycle, Make
from tests.fakes.lifecycle import make_fixture as make_fixture  # the `make` fixture
from tests.test_webhooks_endpoint import PATH
from webhooks.deliveries import DeliveryStatus, WebhookDelivery


async def pickup_payload(lc: Lifecycle, repo: str, installation_id: int) -> bytes:
    """A pickup label put on by the App itself (so nobody's access is asked of GitHub). On
    the test's repository the issue is made on GitHub first, labelled, with no webhook sent:
    a pickup reads its issue from GitHub before it acts (bot.lifecycle.pickup_signal)."""
    data = json.loads((GITHUB_DATA / "webhook-examples/issues/labeled.payload.json").read_text())
    if repo == lc.repo:
        sandbox = lc.sandbox.sandbox
        owner = sandbox.world.user(repo.split("/")[0])
        made = sandbox.ops.create_issue(
            sandbox.world.repo(repo), owner, {"title": data["issue"]["title"], "labels": [PICKUP]}
        )
        data["issue"]["id"], data["issue"]["number"] = made.body["id"], made.body["number"]
    assert lc.api.services.github is not None
    data["sender"]["login"] = (await lc.api.services.github.identity()).bot_login
    data["label"]["name"] = PICKUP
    data["issue"]["labels"] = [data["label"]]
    data["repository"]["full_name"] = repo
    data["installation"] = {"id": installation_id}
    return json.dumps(data).encode()


async def deliver(lc: Lifecycle, body: bytes) -> WebhookDelivery:
    headers = webhook_headers(body, "issues")
    answer = await lc.api.raw.post(PATH, data=body, headers=headers)
    assert answer.status == 202, await answer.text()
    await lc.settle()
    delivery_id = headers["X-GitHub-Delivery"]
    row = lc.api.services.db.call(lambda s: s.get(WebhookDelivery, delivery_id))
    assert row is not None
    return row


def tasks(lc: Lifecycle) -> list[Any]:
    return list(lc.api.services.db.call(lambda s: s.scalars(select(Task)).all()))


async def test_a_delivery_for_a_repository_without_the_app_makes_no_task(make: Make) -> None:
    lc = await make()
    installation = lc.sandbox.installation_id
    row = await deliver(lc, await pickup_payload(lc, "stranger/elsewhere", installation))
    assert row.status == DeliveryStatus.IGNORED
    assert row.reason == "the App has no installation for stranger/elsewhere"
    assert tasks(lc) == []


async def test_a_delivery_naming_another_installation_makes_no_task(make: Make) -> None:
    lc = await make()
    row = await deliver(lc, await pickup_payload(lc, lc.repo, lc.sandbox.installation_id + 1))
    assert row.status == DeliveryStatus.IGNORED
    assert row.reason is not None and "is served by" in row.reason
    assert tasks(lc) == []
    # A pickup rightly addressed makes its task: the check is what refused the other.
    row = await deliver(lc, await pickup_payload(lc, lc.repo, lc.sandbox.installation_id))
    assert row.status == DeliveryStatus.PROCESSED
    assert len(tasks(lc)) == 1
