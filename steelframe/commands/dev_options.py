"""The options of `steelframe dev`. Its work is in steelframe/dev.py, imported only once it
runs: `dev --help` loads no database driver, web framework or sandbox."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from bot.config import DEFAULT_DATA_DIR
from steelframe.cli import Handler
from steelframe.commands.core_options import add_listen_arguments


def register(subparsers: Any) -> None:
    dev = subparsers.add_parser("dev")
    add_listen_arguments(dev)
    dev.add_argument(
        "--data-dir",
        type=Path,
        help=f"dev's data folder: its database, Redis and sandbox (default: {DEFAULT_DATA_DIR})",
    )
    dev.add_argument(
        "--use-configured-services",
        action="store_true",
        help="run on the STEELFRAME_DATA_DIR, STEELFRAME_DATABASE_URL and STEELFRAME_REDIS_URL "
        "this shell or .env configures (by default dev ignores them and keeps its own)",
    )
    dev.set_defaults(handler=Handler("steelframe.dev", "cmd_dev"))
