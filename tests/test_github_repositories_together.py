"""Deliveries about one repository that arrive together all record it, first time, on both
backends: `remember_repositories` is one upsert (no read, then a write another delivery may
have made stale), so no delivery fails with StaleDataError or a duplicate key and needs the
processor's retry; the row ends as the deliveries say. Installations likewise."""

from __future__ import annotations

import asyncio
import json
import logging
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from gidgethub.sansio import Event
from sqlalchemy import func, select, text
from sqlalchemy.orm import Session

from bot.db import Database, create_db_engine, upgrade
from bot.github.installations import (
    GitHubInstallation,
    GitHubRepository,
    RepoRef,
    forget_installation,
    forget_repositories,
    remember_installation,
    remember_repositories,
)
from bot.handler_runs import HandlerDone, running
from tests.conftest import GITHUB_DATA, make_settings
from tests.fakes.patience import PATIENCE_SECONDS
from tests.fakes.together import together as run_together
from webhooks.handlers.issues import on_issue
from webhooks.routing import WebhookContext

DELIVERIES = 16
REPO_ID, FULL_NAME, INSTALLATION = 9001, "octo/together", 77
EARLIER = datetime(2026, 1, 1, tzinfo=UTC)
NOW = datetime(2026, 12, 5, tzinfo=UTC)
HANDLER = "webhooks.handlers.issues.on_issue"


def issue_event(number: int) -> Event:
    data = json.loads((GITHUB_DATA / "webhook-examples/issues/labeled.payload.json").read_text())
    data["action"] = "edited"
    data["issue"]["number"] = number
    data["repository"].update(id=REPO_ID, full_name=FULL_NAME, private=True)
    data["installation"] = {"id": INSTALLATION}
    return Event(data, event="issues", delivery_id=f"delivery-{number}")


def together(count: int, work: Callable[[int], None]) -> list[BaseException]:
    """`work(0..count-1)` on threads released at once; what each raised."""
    return run_together(count, work)[1]


def deliver_issues(db: Database, tmp_path: Path) -> list[BaseException]:
    """Each delivery as a process of its own would handle it (its own recent-writes cache),
    recording its handler as done in the handler's transaction."""
    settings = make_settings(tmp_path)

    def deliver(n: int) -> None:
        ctx = WebhookContext(db=db, settings=settings, clock=lambda: NOW)
        event = issue_event(n + 1)

        async def handle() -> None:
            with running(event.delivery_id, HANDLER, lambda: NOW):
                await on_issue(event, ctx)

        asyncio.run(handle())

    return together(DELIVERIES, deliver)


def the_repository_rows(db: Database) -> list[GitHubRepository]:
    return list(db.call(lambda s: s.scalars(select(GitHubRepository)).all()))


def seed(db: Database, row: GitHubRepository) -> None:
    db.call(lambda s: s.add(row))


@pytest.mark.parametrize(
    "before",
    [
        "nothing",  # the repository's first deliveries
        "same id, other values",  # it became private and moved to another installation
        "same name, other id",  # deleted and created again, or transferred: a new id
        "removed",  # the App lost it, then got it back
    ],
)
def test_deliveries_for_one_repository_arriving_together_all_record_it(
    any_db: Database, tmp_path: Path, caplog: pytest.LogCaptureFixture, before: str
) -> None:
    if before == "same id, other values":
        seed(any_db, repository(REPO_ID, FULL_NAME, private=False, installation_id=5))
    elif before == "same name, other id":
        seed(any_db, repository(REPO_ID - 1, FULL_NAME, private=False, installation_id=5))
    elif before == "removed":
        seed(any_db, repository(REPO_ID, FULL_NAME, removed_at=EARLIER))
    caplog.set_level(logging.DEBUG)

    failed = deliver_issues(any_db, tmp_path)

    assert failed == [], [f"{type(exc).__name__}: {exc}" for exc in failed][:3]
    assert "StaleDataError" not in caplog.text
    [row] = the_repository_rows(any_db)
    assert (row.id, row.full_name, row.private) == (REPO_ID, FULL_NAME, True)
    assert (row.installation_id, row.removed_at, row.updated_at) == (INSTALLATION, None, NOW)
    done = any_db.call(lambda s: s.scalar(select(func.count()).select_from(HandlerDone)))
    assert done == DELIVERIES  # every delivery's handler committed, none left to a retry


def test_a_repository_made_again_under_its_name_while_its_old_id_is_recorded_takes_it(
    pg_url: str,
) -> None:
    """Two deliveries name one repository by its old id and its new one (deleted and made
    again) at once, the new id's waiting on the old one's uncommitted row. PostgreSQL's
    upsert arbitrates on the id only: the name's unique index, checked once the other
    transaction commits, refused the new id (UniqueViolation) where it should take the
    name over. The later commit decides, and neither delivery fails."""
    engine = create_db_engine(pg_url)
    upgrade(engine)
    db = Database(engine)
    try:
        old, new = RepoRef(REPO_ID - 1, FULL_NAME), RepoRef(REPO_ID, FULL_NAME, private=True)
        with db.session() as first:
            remember_repositories(first, INSTALLATION, [old], now=EARLIER)
            second = ThreadPoolExecutor(1).submit(
                db.call, remember_repositories, INSTALLATION, [new], now=NOW
            )
            wait_until_blocked_by(db, first.scalar(text("SELECT pg_backend_pid()")))
        second.result(timeout=PATIENCE_SECONDS)
        [row] = the_repository_rows(db)
        assert (row.id, row.full_name, row.private, row.updated_at) == (
            REPO_ID,
            FULL_NAME,
            True,
            NOW,
        )
    finally:
        engine.dispose()


def wait_until_blocked_by(db: Database, pid: int | None) -> None:
    """Until some statement waits on a lock the backend `pid` holds."""
    blocked = text("SELECT count(*) FROM pg_stat_activity WHERE :pid = ANY(pg_blocking_pids(pid))")
    deadline = time.monotonic() + PATIENCE_SECONDS
    while not db.call(lambda s: s.scalar(blocked, {"pid": pid})):
        assert time.monotonic() < deadline, "the second delivery never waited on the first"
        time.sleep(0.01)


def test_a_delivery_without_an_installation_keeps_the_one_recorded(any_db: Database) -> None:
    seed(any_db, repository(REPO_ID, FULL_NAME, installation_id=INSTALLATION))
    ref = RepoRef(REPO_ID, "octo/renamed", private=True)
    any_db.call(remember_repositories, None, [ref], now=NOW)
    [row] = the_repository_rows(any_db)
    assert (row.full_name, row.private, row.installation_id) == ("octo/renamed", True, INSTALLATION)


def test_remembering_and_forgetting_one_repository_together_never_conflict(
    any_db: Database,
) -> None:
    """`installation_repositories` added and removed, and a recreated repository's deliveries
    at once: whichever commits last decides; none fails."""
    seed(any_db, repository(REPO_ID - 1, FULL_NAME))
    refs = [RepoRef(REPO_ID, FULL_NAME), RepoRef(REPO_ID + 1, "octo/other")]

    def work(n: int) -> None:
        if n % 2:
            any_db.call(forget_repositories, [REPO_ID - 1, REPO_ID, REPO_ID + 1], now=NOW)
        else:
            any_db.call(remember_repositories, INSTALLATION, refs[:: 1 if n % 4 else -1], now=NOW)

    assert together(DELIVERIES, work) == []
    rows = the_repository_rows(any_db)
    assert sorted((row.id, row.full_name) for row in rows) == [
        (REPO_ID, FULL_NAME),
        (REPO_ID + 1, "octo/other"),
    ]


def test_an_uninstall_and_installation_events_together_never_conflict(any_db: Database) -> None:
    """Each installation event records the installation and its repositories (listed in
    GitHub's order, not by id); the uninstall marks them all removed. None fails."""
    refs = [RepoRef(REPO_ID + n, f"octo/repo-{n}") for n in range(6)]

    def work(n: int) -> None:
        if n % 3 == 0:
            any_db.call(forget_installation, INSTALLATION, now=NOW)
            return

        def installed(session: Session) -> None:
            remember_installation(
                session, INSTALLATION, account_login="octo", account_type="User", now=NOW
            )
            remember_repositories(session, INSTALLATION, refs[:: 1 if n % 2 else -1], now=NOW)

        any_db.call(installed)

    assert together(DELIVERIES, work) == []
    assert len(the_repository_rows(any_db)) == len(refs)


def test_installation_events_arriving_together_all_record_it(any_db: Database) -> None:
    def work(n: int) -> None:
        any_db.call(
            remember_installation,
            INSTALLATION,
            account_login="octo",
            account_type="Organization",
            now=NOW,
            suspended=None,
        )

    assert together(DELIVERIES, work) == []
    [row] = list(any_db.call(lambda s: s.scalars(select(GitHubInstallation)).all()))
    assert (row.id, row.account_login, row.created_at, row.updated_at) == (
        INSTALLATION,
        "octo",
        NOW,
        NOW,
    )


def repository(repo_id: int, full_name: str, **values: Any) -> GitHubRepository:
    values = {"private": False, "installation_id": None, "updated_at": EARLIER, **values}
    return GitHubRepository(id=repo_id, full_name=full_name, **values)
