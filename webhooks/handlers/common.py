"""What several handlers share: remembering the repository a delivery is about (and which
installation serves it), and storing GitHub text in memory."""

from __future__ import annotations

import logging
from datetime import datetime

from gidgethub.sansio import Event

from bot.github.installations import RepoRef, remember_repositories
from webhooks.chunks import GitHubText
from webhooks.routing import WebhookContext, lookup

log = logging.getLogger("steelframe.webhooks")
REPO_NEEDS: dict[str, type] = {"repository.full_name": str, "repository.id": int}


async def remember_repository(event: Event, ctx: WebhookContext) -> None:
    """Record the repository (and its installation, when the delivery names one), and tell
    the client which installation serves it, saving a lookup."""
    full_name = str(lookup(event.data, "repository.full_name"))
    repo_id = int(lookup(event.data, "repository.id"))
    installation = lookup(event.data, "installation.id")
    installation_id = installation if isinstance(installation, int) else None
    ref = RepoRef(repo_id, full_name, bool(lookup(event.data, "repository.private")))
    key = f"repository:{repo_id}"
    if not ctx.recent.unchanged(key, (ref, installation_id)):
        await ctx.db.run(remember_repositories, installation_id, [ref], now=ctx.clock())
        ctx.recent.wrote(key, (ref, installation_id))
    if installation_id is not None and ctx.github is not None:
        ctx.github.installations.remember(full_name, installation_id)


async def store_text(ctx: WebhookContext, chunk: GitHubText) -> None:
    if ctx.chunks is None:
        log.debug("no memory sink configured; %s not stored", chunk.ref)
        return
    await ctx.chunks.add(chunk)


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
