"""The `steelframe` command: serve, dev, db, operator, config (packages add more).

Each command module exposes `register(subparsers)`; `COMMAND_MODULES` lists them, so a
package adds its commands in one line here and keeps its code to itself.
"""

from __future__ import annotations

import argparse
import importlib
import logging
import os
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, TypeVar

from bot import __version__
from bot.config import ConfigError, Settings

T = TypeVar("T")
COMMAND_MODULES = [
    "steelframe.commands.core",
    "steelframe.dev",
    "steelframe.commands.github",
    "steelframe.commands.memory",
    "steelframe.commands.tui",
    "steelframe.commands.worker",
    "steelframe.commands.desktop",
]


def load_settings(**defaults: object) -> Settings:
    """Settings for this process: embedded `defaults` < ./steelframe.toml < environment."""
    toml = Path("steelframe.toml")
    return Settings.from_env(
        os.environ, toml_path=toml if toml.exists() else None, defaults=defaults
    )


def with_database(fn: Callable[..., T], *args: Any) -> T:
    """Run `fn(session, *args)` in one transaction on the configured database (migrated
    first), for commands that do one piece of database work and exit."""
    from bot import db as dbmod

    database = dbmod.Database.from_url(load_settings().database_url)
    try:
        dbmod.upgrade(database.engine)
        return database.call(fn, *args)
    finally:
        database.dispose()


def configure_logging(level: str) -> None:
    logging.basicConfig(
        level=level.upper(),
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
        stream=sys.stderr,
    )
    # Alembic narrates every plugin and step at INFO; keep start-up output to what matters.
    logging.getLogger("alembic").setLevel(logging.WARNING)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="steelframe", description="Steelframe operator bot")
    parser.add_argument("--version", action="version", version=f"steelframe {__version__}")
    subparsers = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for name in COMMAND_MODULES:
        importlib.import_module(name).register(subparsers)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        result = args.handler(args)
    except ConfigError as exc:
        print(f"steelframe: configuration error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130
    return int(result or 0)


if __name__ == "__main__":
    raise SystemExit(main())
