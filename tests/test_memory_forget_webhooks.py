"""What the webhook memory writer keeps and forgets, as Chat's search finds it: a deleted or
transferred issue is forgotten with its comments, a secret value the service knows is never
stored, and an older edit delivered after a newer one does not win. The real handlers and
sink, GitHub's example payloads, a real database and index; no HTTP."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest
from gidgethub.sansio import Event
from sqlalchemy import select

from bot.clock import utcnow
from bot.db import Database
from bot.lifecycle.redact import Redactor
from memory import Memory
from memory.models import MemoryChunk
from tests.conftest import GITHUB_DATA, make_settings
from webhooks.handlers import comments, issues
from webhooks.memory_sink import MemorySink
from webhooks.routing import WebhookContext, compose

REPO = "Codertocat/Hello-World"
WEBHOOK_SECRET = "hush-hush-webhook-secret-42"


def payload(event: str, action: str) -> dict[str, Any]:
    data = json.loads((GITHUB_DATA / f"webhook-examples/{event}/{action}.payload.json").read_text())
    assert isinstance(data, dict)
    return data


@pytest.fixture
def database(any_db: Database) -> Database:
    return any_db  # migrated, on SQLite and PostgreSQL


@pytest.fixture
def ctx(database: Database, tmp_path: Path) -> WebhookContext:
    return WebhookContext(
        db=database,
        settings=make_settings(tmp_path),
        clock=utcnow,
        chunks=MemorySink(redactor=Redactor([WEBHOOK_SECRET])),
    )


@pytest.fixture
def memory(database: Database, tmp_path: Path) -> Memory:
    return Memory(tmp_path / "reader", database.session)  # Chat's reader, another process


class Deliveries:
    def __init__(self, ctx: WebhookContext) -> None:
        self.ctx = ctx
        self.router = compose(issues.router, comments.router)
        self.sent = 0

    async def send(self, event: str, data: dict[str, Any]) -> None:
        self.sent += 1
        await self.router.dispatch(Event(data, event=event, delivery_id=f"d{self.sent}"), self.ctx)


@pytest.fixture
def github(ctx: WebhookContext) -> Deliveries:
    return Deliveries(ctx)


def issue_event(action: str, *, number: int = 1, body: str, updated_at: str) -> dict[str, Any]:
    data = payload("issues", "opened" if action not in {"edited", "deleted"} else action)
    data["action"] = action
    data["issue"].update(number=number, body=body, updated_at=updated_at)
    return data


def comment_event(
    action: str, *, comment_id: int, body: str, updated_at: str, number: int = 1
) -> dict[str, Any]:
    data = payload("issue_comment", "created" if action == "created" else action)
    data["issue"]["number"] = number
    data["comment"].update(id=comment_id, body=body, updated_at=updated_at)
    return data


def live_texts(database: Database) -> dict[str, str]:
    return database.call(
        lambda s: {
            str(c.key): c.text
            for c in s.scalars(select(MemoryChunk).where(MemoryChunk.live.is_(True)))
        }
    )


def all_texts(database: Database) -> str:
    return "\n".join(database.call(lambda s: list(s.scalars(select(MemoryChunk.text)))))


def found(memory: Memory, query: str) -> list[str]:
    memory.sync()
    return [hit.record.text for hit in memory.search(query, repo=REPO, floor=0.0)]


@pytest.mark.parametrize("action", ["deleted", "transferred"])
async def test_an_issue_deleted_or_transferred_is_forgotten_with_its_comments(
    action: str, github: Deliveries, memory: Memory, database: Database
) -> None:
    await github.send(
        "issues",
        issue_event(
            "opened", body="The heliotrope rollout stalls", updated_at="2026-01-01T10:00:00Z"
        ),
    )
    await github.send(
        "issue_comment",
        comment_event(
            "created",
            comment_id=71,
            body="heliotrope needs a canary",
            updated_at="2026-01-01T11:00:00Z",
        ),
    )
    await github.send(  # another issue's comment stays
        "issue_comment",
        comment_event(
            "created",
            comment_id=72,
            number=2,
            body="heliotrope docs are fine",
            updated_at="2026-01-01T11:00:00Z",
        ),
    )
    assert len(found(memory, "heliotrope")) == 3

    gone = payload("issues", action)
    gone["repository"] = copy.deepcopy(payload("issues", "opened")["repository"])
    gone["issue"]["number"] = 1
    await github.send("issues", gone)

    assert found(memory, "heliotrope") == ["@Codertocat on #2:\nheliotrope docs are fine"]
    assert set(live_texts(database)) == {"comment:72"}
    assert all_texts(database).count("heliotrope") == 1
    await github.send("issues", gone)  # redelivered: nothing left to forget, no error
    assert set(live_texts(database)) == {"comment:72"}


async def test_a_secret_value_the_service_knows_is_not_stored_from_an_issue_or_comment(
    github: Deliveries, memory: Memory, database: Database
) -> None:
    await github.send(
        "issues",
        issue_event(
            "opened",
            body=f"Deliveries fail; our secret is {WEBHOOK_SECRET} in the config",
            updated_at="2026-01-01T10:00:00Z",
        ),
    )
    await github.send(
        "issue_comment",
        comment_event(
            "created",
            comment_id=71,
            body=f"try again with {WEBHOOK_SECRET}",
            updated_at="2026-01-01T11:00:00Z",
        ),
    )
    assert WEBHOOK_SECRET not in all_texts(database)
    assert found(memory, "deliveries fail secret config") == [
        "#1 Spelling error in the README file\n\n"
        "Deliveries fail; our secret is [REDACTED] in the config"
    ]
    assert live_texts(database)["comment:71"] == "@Codertocat on #1:\ntry again with [REDACTED]"


async def test_an_older_issue_edit_delivered_after_a_newer_one_keeps_the_newer(
    github: Deliveries, memory: Memory, database: Database
) -> None:
    await github.send(
        "issues", issue_event("opened", body="draft", updated_at="2026-01-01T10:00:00Z")
    )
    await github.send(
        "issues", issue_event("edited", body="deploy on Fridays", updated_at="2026-01-01T12:00:00Z")
    )
    await github.send(  # the earlier edit, delivered late
        "issues", issue_event("edited", body="deploy on Mondays", updated_at="2026-01-01T11:00:00Z")
    )
    assert live_texts(database)[f"issue:{REPO}#1"].endswith("deploy on Fridays")
    assert found(memory, "Mondays") == []
    await github.send(  # a later change (a label) with the same text: still the newest
        "issues",
        issue_event("labeled", body="deploy on Fridays", updated_at="2026-01-01T13:00:00Z"),
    )
    await github.send(
        "issues", issue_event("edited", body="deploy on Sundays", updated_at="2026-01-01T14:00:00Z")
    )
    assert live_texts(database)[f"issue:{REPO}#1"].endswith("deploy on Sundays")


async def test_an_older_comment_edit_delivered_after_a_newer_one_keeps_the_newer(
    github: Deliveries, memory: Memory, database: Database
) -> None:
    def edit(body: str, at: str) -> dict[str, Any]:
        return comment_event("edited", comment_id=71, body=body, updated_at=at)

    await github.send(
        "issue_comment",
        comment_event(
            "created", comment_id=71, body="use staging", updated_at="2026-01-01T10:00:00Z"
        ),
    )
    await github.send("issue_comment", edit("use production", "2026-01-01T12:00:00Z"))
    await github.send("issue_comment", edit("use the canary", "2026-01-01T11:00:00Z"))
    assert live_texts(database)["comment:71"] == "@Codertocat on #1:\nuse production"
    assert found(memory, "canary") == []


async def test_an_edit_back_to_an_earlier_text_still_wins_over_a_late_edit_between(
    github: Deliveries, memory: Memory, database: Database
) -> None:
    # Fridays at 10:00, Mondays at 11:00, back to Fridays at 12:00; the 11:00 edit comes last.
    await github.send(
        "issues", issue_event("opened", body="deploy on Fridays", updated_at="2026-01-01T10:00:00Z")
    )
    await github.send(
        "issues", issue_event("edited", body="deploy on Fridays", updated_at="2026-01-01T12:00:00Z")
    )
    await github.send(
        "issues", issue_event("edited", body="deploy on Mondays", updated_at="2026-01-01T11:00:00Z")
    )
    assert live_texts(database)[f"issue:{REPO}#1"].endswith("deploy on Fridays")
    assert found(memory, "Mondays") == []
