"""GitHub commands: `github check` (is the App reachable and installed?), `webhooks list`
and `webhooks replay` (look at the delivery log and its dead letters; process deliveries
again). Their options, and `github register`'s, are in github_options.py."""

from __future__ import annotations

import argparse
import asyncio
import shlex
import sys
import uuid
from typing import Any

from bot.errors import SteelframeError
from steelframe.cli import load_settings, with_database
from steelframe.logs import configure_logging


def cmd_github_check(args: argparse.Namespace) -> int:
    from bot.github.client import GitHubClient
    from bot.github.errors import GitHubNotFound, GitHubUnavailable
    from bot.github.retry import RetryPolicy

    settings = load_settings()
    configure_logging(settings)
    if not settings.github_configured:
        print(
            "steelframe: no GitHub App configured (APP_ID and PRIVATE_KEY[_PATH])", file=sys.stderr
        )
        return 1
    repo = args.repo or settings.repo

    async def check() -> None:
        # One quick retry: an operator at a terminal wants the answer, not a long backoff.
        client = GitHubClient.from_settings(
            settings, retry=RetryPolicy(max_attempts=2, base_delay=0.5)
        )
        try:
            print(f"checking the App at {settings.github_api_url} ...", flush=True)
            identity = await client.identity()
            print(f"app: {identity.slug} (id {identity.id}) · bot user {identity.bot_login}")
            try:
                installation = await client.installation_id(repo)
            except GitHubNotFound as exc:
                # GitHub's 404 says only "Not Found": name what is missing and the fix.
                raise NotInstalled(
                    f"the App {identity.slug} is not installed on {repo} (or cannot see it): "
                    f"install it at {identity.html_url}/installations/new, then check again"
                ) from exc
            print(f"installed on {repo}: installation {installation}")
            await client.installation_token(repo)
            print("installation token: ok")
        finally:
            await client.close()

    try:
        asyncio.run(check())
    except GitHubUnavailable as exc:  # no answer at all: not something GitHub said
        print(
            f"steelframe: no answer from {settings.github_api_url}: {exc.message}. Check "
            "GITHUB_API_URL (or GHE_HOST) and the network.",
            file=sys.stderr,
        )
        return 1
    except NotInstalled as exc:
        print(f"steelframe: {exc}", file=sys.stderr)
        return 1
    except SteelframeError as exc:
        print(f"steelframe: GitHub said: {exc.message}", file=sys.stderr)
        return 1
    return 0


class NotInstalled(Exception):
    """`github check`'s repository has no installation of the App."""


def cmd_webhooks_list(args: argparse.Namespace) -> int:
    from webhooks.deliveries import FAILED_STATUSES, DeliveryStatus
    from webhooks.delivery_log import list_deliveries

    if args.status is not None and args.status not in set(DeliveryStatus):
        known = ", ".join(DeliveryStatus)
        print(f"steelframe: unknown status {args.status!r}: one of {known}", file=sys.stderr)
        return 2
    statuses = list(FAILED_STATUSES) if args.failed else [args.status] if args.status else []
    found = with_database(
        lambda session: list_deliveries(session, statuses=statuses, limit=max(args.limit, 1))
    )
    for d in found:
        kind = f"{d.event}.{d.action}" if d.action else d.event
        due = f" next {d.next_attempt_at:%H:%M:%S}" if d.status == DeliveryStatus.RETRYING else ""
        note = f"  ({d.reason})" if d.reason else ""
        print(
            f"{d.received_at:%Y-%m-%d %H:%M:%S}  {d.delivery_id:36}  {kind:32} "
            f"{d.repo or '-':30} {d.status} x{d.attempts}{due}{note}"
        )
    if not found:
        # Which database was read: run from another folder, a command reads that folder's
        # ./var (a new, empty database), not the one `make run` uses.
        where = load_settings().redacted()["STEELFRAME_DATABASE_URL"]
        which = f"{args.status} " if args.status else "failed " if args.failed else ""
        print(f"no {which}deliveries in {where}")
    return 0


def cmd_webhooks_replay(args: argparse.Namespace) -> int:
    from webhooks.delivery_log import Replay, failed_ids, requeue

    if bool(args.delivery_ids) == bool(args.failed):
        print("steelframe: give delivery ids or --failed (not both)", file=sys.stderr)
        return 2

    def replay_all(session: Any) -> list[tuple[str, Replay]]:
        ids = failed_ids(session) if args.failed else list(dict.fromkeys(args.delivery_ids))
        return [(delivery_id, requeue(session, delivery_id)) for delivery_id in ids]

    results = with_database(replay_all)
    status = 0
    for delivery_id, result in results:
        if result is Replay.QUEUED:
            print(f"{delivery_id}: queued; a running service processes it within seconds")
        elif result is Replay.UNKNOWN:
            print(f"steelframe: no delivery {delivery_id!r}", file=sys.stderr)
            status = 1
        else:
            print(
                f"steelframe: {delivery_id!r} cannot be replayed (rejected, or being "
                "processed: redeliver a rejected one from GitHub after fixing the cause)",
                file=sys.stderr,
            )
            status = 1
    if args.failed:
        print(f"{len(results)} dead deliveries queued again")
    return status


def cmd_webhooks_sign(args: argparse.Namespace) -> int:
    """A copy-paste way to send a test delivery: the payload signed as GitHub signs it."""
    from webhooks.signature import signature_for

    settings = load_settings()
    secret = args.secret or (settings.webhook_secret.reveal() if settings.webhook_secret else "")
    if not secret:
        print("steelframe: no secret: set WEBHOOK_SECRET or pass --secret", file=sys.stderr)
        return 2
    try:
        body = args.payload.read_bytes()
    except OSError as exc:
        print(f"steelframe: {args.payload}: {exc.strerror}", file=sys.stderr)
        return 2
    url = (args.url or f"http://127.0.0.1:{settings.port}").rstrip("/")
    command = [
        "curl", "-s", "-X", "POST", f"{url}/api/github/webhooks",
        "-H", "Content-Type: application/json",
        "-H", f"X-GitHub-Event: {args.event}",
        "-H", f"X-GitHub-Delivery: {uuid.uuid4()}",
        "-H", f"X-Hub-Signature-256: {signature_for(secret, body)}",
        "--data-binary", f"@{args.payload}",
    ]  # fmt: skip
    print(shlex.join(command))
    return 0
