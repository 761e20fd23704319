"""`installation` and `installation_repositories`: remember where the App is installed."""

from __future__ import annotations

import asyncio
from datetime import datetime
from typing import Any

from gidgethub.routing import Router
from gidgethub.sansio import Event
from sqlalchemy import select
from sqlalchemy.orm import Session

from bot.github.installation_removals import InstallationRemovals
from bot.github.installations import (
    GitHubRepository,
    RepoRef,
    forget_installation,
    forget_repositories,
    remember_installation,
    remember_repositories,
)
from webhooks.chunks import Write
from webhooks.handlers.common import commit, log
from webhooks.routing import WebhookContext, handles

router = Router()
INSTALLATION_NEEDS: dict[str, type] = {"installation.id": int, "installation.account": dict}


def _refs(items: Any) -> list[RepoRef]:
    refs = []
    for item in items if isinstance(items, list) else []:
        if isinstance(item, dict) and isinstance(item.get("id"), int) and item.get("full_name"):
            refs.append(RepoRef(item["id"], str(item["full_name"]), bool(item.get("private"))))
    return refs


@handles(router, "installation", needs=INSTALLATION_NEEDS)
async def on_installation(event: Event, ctx: WebhookContext) -> None:
    installation = event.data["installation"]
    installation_id = int(installation["id"])
    account = installation["account"]
    action = event.data.get("action")
    now = ctx.clock()
    ctx.recent.clear()  # repositories may have moved between installations
    if action == "deleted":
        # The repositories it served, as stored and as the event names them: the lookup
        # must stop answering this installation for them, or a delivery GitHub sends late
        # (deliveries are not ordered) passes the installation check and acts on a
        # repository the App no longer has (webhooks.installed).
        served = {ref.full_name for ref in _refs(event.data.get("repositories"))}

        def forget(session: Any) -> None:
            served.update(installation_repositories(session, installation_id))
            forget_installation(session, installation_id, now=now)

        await commit(ctx, [Write(forget)])
        if ctx.github is not None:
            ctx.github.tokens.invalidate(installation_id)
            for full_name in sorted(served):
                ctx.github.installations.invalidate(full_name)
        await _tell_every_process(ctx, served, installation_id)
        log.info("installation %s removed (%s)", installation_id, account.get("login"))
        return
    suspended = {"suspend": True, "unsuspend": False}.get(str(action))
    named = _refs(event.data.get("repositories"))
    served = {ref.full_name for ref in named}

    def remember(session: Any) -> None:
        _remember_account(session, installation_id, account, now, suspended=suspended)
        remember_repositories(session, installation_id, named, now=now)
        served.update(installation_repositories(session, installation_id))

    await commit(ctx, [Write(remember)])
    if suspended:
        # A suspended installation serves no repository until `unsuspend` (its tokens are
        # refused): every process forgets it now, as on an uninstall; after `unsuspend`
        # the next lookup finds it again (the store, then GitHub, answer it once more).
        if ctx.github is not None:
            ctx.github.tokens.invalidate(installation_id)
            for full_name in sorted(served):
                ctx.github.installations.invalidate(full_name)
    if suspended is not None:
        await _tell_every_process(ctx, served, installation_id, suspended=suspended)
    log.info("installation %s %s (%s)", installation_id, action, account.get("login"))


@handles(router, "installation_repositories", needs=INSTALLATION_NEEDS)
async def on_installation_repositories(event: Event, ctx: WebhookContext) -> None:
    installation = event.data["installation"]
    installation_id = int(installation["id"])
    added = _refs(event.data.get("repositories_added"))
    removed = _refs(event.data.get("repositories_removed"))
    now = ctx.clock()
    ctx.recent.clear()

    def apply(session: Any) -> None:
        _remember_account(session, installation_id, installation["account"], now)
        remember_repositories(session, installation_id, added, now=now)
        forget_repositories(session, [ref.id for ref in removed], now=now)

    await commit(ctx, [Write(apply)])
    if ctx.github is not None:
        for ref in added:
            ctx.github.installations.remember(ref.full_name, installation_id)
        for ref in removed:
            ctx.github.installations.invalidate(ref.full_name)
    await _tell_every_process(ctx, {ref.full_name for ref in removed}, installation_id)
    log.info("installation %s: +%d -%d repositories", installation_id, len(added), len(removed))


async def _tell_every_process(
    ctx: WebhookContext, repos: set[str], installation_id: int, *, suspended: bool | None = None
) -> None:
    """The other serve and worker processes cache the installation of a repository too:
    told through Redis (`bot.github.installation_removals`), they forget it before their
    next answer. A Redis error fails the delivery, which is retried (all of it is
    idempotent); without Redis there is no other process to tell."""
    if ctx.queue is None or ctx.settings.app_id is None or not repos:
        return
    removals = InstallationRemovals(ctx.queue.connection, app_id=ctx.settings.app_id)
    await asyncio.to_thread(removals.removed, repos, installation_id, suspended=suspended)


def _remember_account(
    session: Any,
    installation_id: int,
    account: dict[str, Any],
    now: datetime,
    *,
    suspended: bool | None = None,
) -> None:
    """The installation and the account it belongs to, as the event names them."""
    remember_installation(
        session,
        installation_id,
        account_login=account.get("login"),
        account_type=account.get("type"),
        now=now,
        suspended=suspended,
    )


def installation_repositories(session: Session, installation_id: int) -> list[str]:
    """The names of the repositories stored as served by the installation."""
    served = GitHubRepository.installation_id == installation_id
    return list(session.scalars(select(GitHubRepository.full_name).where(served)))
