"""GitHub commands: `github check` (is the App reachable and installed?), `webhooks list`
and `webhooks replay` (look at the delivery log; process a failed delivery again)."""

from __future__ import annotations

import argparse
import asyncio
import sys
from typing import Any

from sqlalchemy import select

from bot.errors import SteelframeError
from steelframe import registration
from steelframe.cli import load_settings, with_database
from steelframe.logs import configure_logging


def register(subparsers: Any) -> None:
    github = subparsers.add_parser("github")
    github_sub = github.add_subparsers(dest="github_command", required=True, metavar="SUBCOMMAND")
    check = github_sub.add_parser("check", help="authenticate as the App; show its installation")
    check.add_argument("--repo", help="owner/name (default: STEELFRAME_REPO)")
    check.set_defaults(handler=cmd_github_check)
    register_app = github_sub.add_parser(
        "register", help="register the GitHub App from app.yml (GitHub's manifest flow)"
    )
    registration.add_arguments(register_app)
    register_app.set_defaults(handler=registration.cmd_github_register)

    hooks = subparsers.add_parser("webhooks")
    hooks_sub = hooks.add_subparsers(dest="webhooks_command", required=True, metavar="SUBCOMMAND")
    listing = hooks_sub.add_parser("list", help="newest deliveries first")
    listing.add_argument("--status", help="received|processing|processed|ignored|failed|rejected")
    listing.add_argument("--limit", type=int, default=20, help="at most this many deliveries")
    listing.set_defaults(handler=cmd_webhooks_list)
    replay = hooks_sub.add_parser("replay", help="process a stored delivery again")
    replay.add_argument("delivery_id", help="the X-GitHub-Delivery id of a stored delivery")
    replay.set_defaults(handler=cmd_webhooks_replay)


def cmd_github_check(args: argparse.Namespace) -> int:
    from bot.github.client import GitHubClient

    settings = load_settings()
    configure_logging(settings)
    if not settings.github_configured:
        print(
            "steelframe: no GitHub App configured (APP_ID and PRIVATE_KEY[_PATH])", file=sys.stderr
        )
        return 1
    repo = args.repo or settings.repo

    async def check() -> None:
        client = GitHubClient.from_settings(settings)
        try:
            print(f"checking the App at {settings.github_api_url} ...", flush=True)
            identity = await client.identity()
            print(f"app: {identity.slug} (id {identity.id}) · bot user {identity.bot_login}")
            installation = await client.installation_id(repo)
            print(f"installed on {repo}: installation {installation}")
            await client.installation_token(repo)
            print("installation token: ok")
        finally:
            await client.close()

    try:
        asyncio.run(check())
    except SteelframeError as exc:
        print(f"steelframe: GitHub said: {exc.message}", file=sys.stderr)
        return 1
    return 0


def cmd_webhooks_list(args: argparse.Namespace) -> int:
    from webhooks.deliveries import DeliveryStatus, WebhookDelivery

    if args.status is not None and args.status not in set(DeliveryStatus):
        print(f"steelframe: unknown status {args.status!r}", file=sys.stderr)
        return 2

    def newest(session: Any) -> list[tuple[Any, ...]]:
        query = select(
            WebhookDelivery.received_at,
            WebhookDelivery.delivery_id,
            WebhookDelivery.event,
            WebhookDelivery.action,
            WebhookDelivery.repo,
            WebhookDelivery.status,
            WebhookDelivery.reason,
        ).order_by(WebhookDelivery.received_at.desc())
        if args.status:
            query = query.where(WebhookDelivery.status == args.status)
        return [tuple(row) for row in session.execute(query.limit(max(args.limit, 1)))]

    for received, delivery, event, action, repo, status, reason in with_database(newest):
        kind = f"{event}.{action}" if action else event
        note = f"  ({reason})" if reason else ""
        print(
            f"{received:%Y-%m-%d %H:%M:%S}  {delivery:36}  {kind:32} {repo or '-':30} "
            f"{status}{note}"
        )
    return 0


def cmd_webhooks_replay(args: argparse.Namespace) -> int:
    from webhooks.deliveries import requeue

    if not with_database(requeue, args.delivery_id):
        print(
            f"steelframe: no replayable delivery {args.delivery_id!r} (rejected ones are not)",
            file=sys.stderr,
        )
        return 1
    print(f"{args.delivery_id}: queued; a running service processes it within a minute")
    return 0
