"""The options of `steelframe github` and `steelframe webhooks`. Their work is in github.py
and steelframe/registration.py, imported only once a subcommand runs: `github --help` loads
no web framework nor GitHub client."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from steelframe.cli import Handler


def _github(function: str) -> Handler:
    return Handler("steelframe.commands.github", function)


def register(subparsers: Any) -> None:
    github = subparsers.add_parser("github")
    github_sub = github.add_subparsers(dest="github_command", required=True, metavar="SUBCOMMAND")
    check = github_sub.add_parser("check", help="authenticate as the App; show its installation")
    check.add_argument("--repo", help="owner/name (default: STEELFRAME_REPO)")
    check.set_defaults(handler=_github("cmd_github_check"))
    register_app = github_sub.add_parser(
        "register", help="register the GitHub App from app.yml (GitHub's manifest flow)"
    )
    registration_arguments(register_app)
    register_app.set_defaults(handler=Handler("steelframe.registration", "cmd_github_register"))

    hooks = subparsers.add_parser("webhooks")
    hooks_sub = hooks.add_subparsers(dest="webhooks_command", required=True, metavar="SUBCOMMAND")
    listing = hooks_sub.add_parser("list", help="newest deliveries first")
    which = listing.add_mutually_exclusive_group()
    which.add_argument(  # webhooks.deliveries.DeliveryStatus (2 s of imports, so not here)
        "--status",
        help="only these: received, processing, processed, ignored, retrying, dead, "
        "rejected or replayed",
    )
    which.add_argument(
        "--failed", action="store_true", help="dead letters and deliveries being retried"
    )
    listing.add_argument("--limit", type=int, default=20, help="at most this many deliveries")
    listing.set_defaults(handler=_github("cmd_webhooks_list"))
    replay = hooks_sub.add_parser(
        "replay", help="process stored deliveries again (by id, or every dead one)"
    )
    replay.add_argument(
        "delivery_ids",
        nargs="*",
        metavar="DELIVERY_ID",
        help="X-GitHub-Delivery ids of stored deliveries",
    )
    replay.add_argument("--failed", action="store_true", help="every dead delivery")
    replay.set_defaults(handler=_github("cmd_webhooks_replay"))
    sign = hooks_sub.add_parser(
        "sign", help="print a curl command that posts a payload file as a signed webhook"
    )
    sign.add_argument("payload", type=Path, help="the JSON payload file (GitHub's shape)")
    sign.add_argument("--event", default="issues", help="the X-GitHub-Event header")
    sign.add_argument("--url", help="the service (default: http://127.0.0.1:PORT)")
    sign.add_argument("--secret", help="the webhook secret (default: WEBHOOK_SECRET)")
    sign.set_defaults(handler=_github("cmd_webhooks_sign"))


def registration_arguments(parser: argparse.ArgumentParser) -> None:
    """`github register`'s options: steelframe/registration.py reads them (Registration.args)."""
    parser.add_argument("--manifest", default="app.yml", help="the App manifest to register")
    parser.add_argument("--org", help="register the App for this organization, not your user")
    parser.add_argument("--name", help="the App's name (default: the manifest's)")
    parser.add_argument(
        "--webhook-url",
        help="where GitHub sends webhooks (default: WEBHOOK_PROXY_URL if set, else "
        "STEELFRAME_PUBLIC_URL/api/github/webhooks if set, else "
        "http://localhost:PORT/api/github/webhooks)",
    )
    parser.add_argument(
        "--github-url",
        help="the GitHub API to register with: GitHub Enterprise's https://HOST/api/v3, or a "
        "local sandbox's URL (default: GITHUB_API_URL, else GHE_HOST, else api.github.com)",
    )
    parser.add_argument("--env-file", default=".env", help="where the credentials are written")
    parser.add_argument(
        "--key-dir",
        type=Path,
        help="folder for the App's private key (default: $XDG_CONFIG_HOME/steelframe, else "
        "~/.config/steelframe: outside any checkout)",
    )
    parser.add_argument("--host", default="127.0.0.1", help="address of the registration page")
    parser.add_argument(
        "--port", type=int, default=3000, help="port of the registration page; 0 picks one"
    )
