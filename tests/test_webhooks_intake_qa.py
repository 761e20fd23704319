"""Webhook intake after the pull request, as GitHub really delivers: late, repeated, out of
order, for an installation that is gone, or signed but malformed. Nothing is lost, nothing
acted on twice or when stale, and the delivery's record says why."""

from __future__ import annotations

from sqlalchemy import select

from bot.lifecycle.models import Task
from tests.fakes.lifecycle import Make
from tests.fakes.lifecycle import make_fixture as make_fixture  # the `make` fixture
from tests.test_webhooks_installed import deliver, pickup_payload
from webhooks.deliveries import DeliveryStatus


async def test_a_delivery_after_the_app_was_uninstalled_is_ignored_with_the_reason(
    make: Make,
) -> None:
    """GitHub may deliver an event raised before the uninstall after `installation.deleted`
    (deliveries are not ordered): the App can no longer act on the repository, so the
    delivery is ignored, not processed (a task that can never be worked) nor retried until
    dead (its token requests all 404)."""
    lc = await make()
    sandbox = lc.sandbox.sandbox
    installation = sandbox.world.installations[lc.sandbox.installation_id]
    # The App has served the repository (its installation is known to the process).
    row = await deliver(lc, await pickup_payload(lc, lc.repo, installation.id, issue_id=1))
    assert row.status == DeliveryStatus.PROCESSED
    sandbox.uninstall(installation)
    await lc.settle()
    (deleted,) = [
        d for d in sandbox.hooks.sent if (d.event, d.action) == ("installation", "deleted")
    ]
    assert deleted.status == 202
    late = await deliver(lc, await pickup_payload(lc, lc.repo, installation.id, issue_id=2))
    assert late.status == DeliveryStatus.IGNORED, (late.status, late.reason)
    assert late.reason == f"the App has no installation for {lc.repo}"
    made = lc.api.services.db.call(lambda s: list(s.scalars(select(Task)).all()))
    assert len(made) == 1  # only the pickup from before the uninstall
