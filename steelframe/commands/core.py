"""Core commands: serve, db upgrade, operator create/rotate, config."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from aiohttp import web

from bot import db as dbmod
from bot.appkeys import SERVICES
from bot.config import settings_fields
from bot.errors import SteelframeError
from bot.operators import create_operator, rotate_token
from steelframe.cli import configure_logging, load_settings, with_database
from steelframe.commands.memory import upgrade_index


def register(subparsers: Any) -> None:
    serve = subparsers.add_parser("serve", help="run the web service (migrates first)")
    serve.add_argument("--host", default="127.0.0.1")
    serve.add_argument("--port", type=int, default=8080)
    serve.set_defaults(handler=cmd_serve)

    db = subparsers.add_parser("db", help="database commands")
    db_sub = db.add_subparsers(dest="db_command", required=True, metavar="SUBCOMMAND")
    upgrade = db_sub.add_parser("upgrade", help="apply all migrations")
    upgrade.set_defaults(handler=cmd_db_upgrade)

    operator = subparsers.add_parser("operator", help="manage operators")
    op_sub = operator.add_subparsers(dest="operator_command", required=True, metavar="SUBCOMMAND")
    create = op_sub.add_parser("create", help="create an operator; prints its token last")
    create.add_argument("name")
    create.set_defaults(handler=cmd_operator_create)
    rotate = op_sub.add_parser("rotate", help="issue a new token for an operator")
    rotate.add_argument("name")
    rotate.set_defaults(handler=cmd_operator_rotate)

    config = subparsers.add_parser("config", help="show the effective settings (secrets masked)")
    config.add_argument("--list", action="store_true", help="list every variable and default")
    config.set_defaults(handler=cmd_config)


def cmd_serve(args: argparse.Namespace) -> int:
    from steelframe.server import create_app

    settings = load_settings()
    configure_logging(settings.log_level)
    app = create_app(settings)
    upgrade_index(app[SERVICES].memory, sys.stdout)
    print(f"url: http://{args.host}:{args.port}", flush=True)
    web.run_app(app, host=args.host, port=args.port, print=None)
    return 0


def cmd_db_upgrade(args: argparse.Namespace) -> int:
    settings = load_settings()
    database = dbmod.Database.from_url(settings.database_url)
    print("applying migrations ...", flush=True)
    dbmod.upgrade(database.engine)
    print("database is up to date")
    database.dispose()
    return 0


def cmd_operator_create(args: argparse.Namespace) -> int:
    try:
        operator, token = with_database(create_operator, args.name)
    except SteelframeError as exc:
        print(f"steelframe: {exc.message}", file=sys.stderr)
        return 1
    print(f"created operator {operator.name!r}; keep this token, it is shown once:")
    print(token)
    return 0


def cmd_operator_rotate(args: argparse.Namespace) -> int:
    try:
        token = with_database(rotate_token, args.name)
    except SteelframeError as exc:
        print(f"steelframe: {exc.message}", file=sys.stderr)
        return 1
    print(f"new token for {args.name!r}; the old one no longer works:")
    print(token)
    return 0


def cmd_config(args: argparse.Namespace) -> int:
    if args.list:
        for env, default, help_text in settings_fields():
            print(f"{env:32} {default:28} {help_text}")
        return 0
    for key, value in load_settings().redacted().items():
        print(f"{key}={value}")
    return 0
