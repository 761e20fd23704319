"""The options of serve, db and operator. Their work is in core.py, imported only once one
of them runs: `serve --help` loads no database driver, web framework or app."""

from __future__ import annotations

import argparse
from typing import Any

from steelframe.cli import Handler
from steelframe.event_loop import CHOICES


def _core(function: str) -> Handler:
    return Handler("steelframe.commands.core", function)


def register(subparsers: Any) -> None:
    serve = subparsers.add_parser("serve")
    add_listen_arguments(serve)
    serve.add_argument(
        "--loop",
        choices=CHOICES,
        default="auto",
        help="event loop: uvloop when installed (auto), or asyncio's own",
    )
    serve.add_argument(
        "--processes",
        type=int,
        default=1,
        help="serve processes sharing the port, one event loop each (more than 1 needs Redis)",
    )
    serve.add_argument(
        "--reuse-port",
        action="store_true",
        help="bind with SO_REUSEPORT, so several serve processes can share the port",
    )
    serve.add_argument(
        "--no-relay",
        action="store_true",
        help="do not open WEBHOOK_PROXY_URL here (another process of this service does)",
    )
    serve.set_defaults(handler=_core("cmd_serve"))
    _register_db(subparsers)
    _register_operator(subparsers)


def _register_db(subparsers: Any) -> None:
    db = subparsers.add_parser("db")
    db_sub = db.add_subparsers(dest="db_command", required=True, metavar="SUBCOMMAND")
    upgrade = db_sub.add_parser("upgrade", help="apply all migrations")
    upgrade.set_defaults(handler=_core("cmd_db_upgrade"))
    current = db_sub.add_parser("current", help="show the migration the database is at")
    current.set_defaults(handler=_core("cmd_db_current"))
    history = db_sub.add_parser("history", help="list every migration, marking the applied one")
    history.set_defaults(handler=_core("cmd_db_history"))


def _register_operator(subparsers: Any) -> None:
    operator = subparsers.add_parser("operator")
    op_sub = operator.add_subparsers(dest="operator_command", required=True, metavar="SUBCOMMAND")
    create = op_sub.add_parser("create", help="create an operator; prints its token last")
    create.add_argument("name", help="the operator's name")
    create.set_defaults(handler=_core("cmd_operator_create"))
    rotate = op_sub.add_parser("rotate", help="issue a new token for an operator")
    rotate.add_argument("name", help="the operator's name")
    rotate.set_defaults(handler=_core("cmd_operator_rotate"))
    listing = op_sub.add_parser("list", help="every operator's name and creation time")
    listing.set_defaults(handler=_core("cmd_operator_list"))
    revoke = op_sub.add_parser(
        "revoke", help="end an operator's token and browser sign-ins (rotate issues a new one)"
    )
    revoke.add_argument("name", help="the operator's name")
    revoke.set_defaults(handler=_core("cmd_operator_revoke"))


def add_listen_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--host", help="address to listen on (default: HOST, else 127.0.0.1)")
    parser.add_argument(
        "--port", type=int, help="port to listen on; 0 picks a free one (default: PORT, else 8080)"
    )
