"""Forgetting and secret masking as the running service is put together (steelframe.parts,
steelframe.composition), not only as their modules work alone: Chat's "forget #N" reaches
session memory, and an issue quoting a secret this service knows is stored masked."""

from __future__ import annotations

from tests.conftest import WEBHOOK_SECRET
from tests.fakes.lifecycle import Make
from tests.fakes.lifecycle import make_fixture as make_fixture  # the `make` fixture


async def test_chat_forgets_an_issue_and_webhook_text_is_stored_without_known_secrets(
    make: Make,
) -> None:
    lc = await make()
    memory = lc.api.services.memory
    assert memory is not None
    number = await lc.open_issue(
        "Deliveries fail at night",
        body=f"The nightly deliveries fail; the webhook secret is {WEBHOOK_SECRET} here.",
        pickup=False,
    )
    memory.sync()  # the index catches up from the rows the webhook handler wrote
    [hit] = memory.search("nightly deliveries fail", repo=lc.repo)
    assert WEBHOOK_SECRET not in hit.record.text and "[REDACTED]" in hit.record.text

    turn = await lc.api.post("/api/operator/chat", json={"message": f"forget #{number}"})
    assert turn.status == 200, await turn.text()
    reply = (await turn.json())["reply"]
    assert "Forgotten from session memory" in reply, reply
    memory.sync()
    assert memory.search("nightly deliveries fail", repo=lc.repo) == []
