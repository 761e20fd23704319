"""What several handlers share: remembering the repository a delivery is about (and which
installation serves it), storing GitHub text in memory, and committing a handler's writes
in one transaction with its "done" record (exactly once across crashes: bot.handler_runs)."""

from __future__ import annotations

import logging
from collections.abc import Iterable
from datetime import datetime

from gidgethub.sansio import Event
from sqlalchemy.orm import Session

from bot.github.installations import RepoRef, remember_repositories
from bot.handler_runs import record_done
from webhooks.chunks import GitHubText, Write
from webhooks.routing import WebhookContext, lookup

log = logging.getLogger("steelframe.webhooks")
REPO_NEEDS: dict[str, type] = {"repository.full_name": str, "repository.id": int}


def repository_write(event: Event, ctx: WebhookContext) -> Write | None:
    """Recording the repository (and its installation, when the delivery names one); None
    if this process recorded the same lately. Tells the client at once which installation
    serves it, saving a lookup."""
    full_name = str(lookup(event.data, "repository.full_name"))
    repo_id = int(lookup(event.data, "repository.id"))
    installation = lookup(event.data, "installation.id")
    installation_id = installation if isinstance(installation, int) else None
    if installation_id is not None and ctx.github is not None:
        ctx.github.installations.remember(full_name, installation_id)
    ref = RepoRef(repo_id, full_name, bool(lookup(event.data, "repository.private")))
    key, fingerprint = f"repository:{repo_id}", (ref, installation_id)
    if ctx.recent.unchanged(key, fingerprint):
        return None
    now = ctx.clock()
    return Write(
        apply=lambda session: remember_repositories(session, installation_id, [ref], now=now),
        committed=lambda: ctx.recent.wrote(key, fingerprint),
    )


def text_write(ctx: WebhookContext, chunk: GitHubText) -> Write | None:
    if ctx.chunks is None:
        log.debug("no memory sink configured; %s not stored", chunk.ref)
        return None
    return ctx.chunks.write(chunk)


def text_forget(ctx: WebhookContext, ref: str) -> Write | None:
    if ctx.chunks is None:
        return None
    return ctx.chunks.forget(ref)


async def forget_text(event: Event, ctx: WebhookContext, ref: str) -> None:
    """The text stored under `ref` forgotten (deleted on GitHub), in the handler's one
    transaction; a redelivery finds nothing left to forget."""
    await commit(ctx, [repository_write(event, ctx), text_forget(ctx, ref)])


async def commit(ctx: WebhookContext, writes: Iterable[Write | None]) -> None:
    """Apply a handler's writes in one transaction together with the record that the handler
    is done for this delivery: after a crash either both are committed (the handler is not
    run again) or neither (running it again is its first run). Nothing to write, nothing
    committed: the processor records the outcome with the delivery's."""
    todo = [write for write in writes if write is not None]
    if not todo:
        return

    def apply(session: Session) -> None:
        for write in todo:
            write.apply(session)
        record_done(session)

    await ctx.db.run(apply)
    for write in todo:
        write.committed()


async def remember_text(event: Event, ctx: WebhookContext, chunk: GitHubText) -> None:
    """The repository and the text, in the handler's one transaction."""
    await commit(ctx, [repository_write(event, ctx), text_write(ctx, chunk)])


def github_time(value: object, default: datetime) -> datetime:
    if not isinstance(value, str):
        return default
    try:
        return datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        return default


def login_of(data: object) -> str | None:
    login = lookup(data, "login")
    return login if isinstance(login, str) else None
