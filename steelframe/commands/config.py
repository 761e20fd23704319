"""`steelframe config`: the effective settings, secrets masked."""

from __future__ import annotations

import argparse
from typing import Any

from steelframe.cli import load_settings


def register(subparsers: Any) -> None:
    config = subparsers.add_parser("config")
    config.add_argument(
        "--list",
        action="store_true",
        help="every setting with its value, where it came from, its default and meaning",
    )
    config.set_defaults(handler=cmd_config)


def cmd_config(args: argparse.Namespace) -> int:
    settings = load_settings()
    if not args.list:
        for key, value in settings.redacted().items():
            print(f"{key}={value}")
        return 0
    rows = [("VARIABLE", "VALUE", "SOURCE", "DEFAULT", "MEANING"), *settings.described()]
    widths = [max(len(row[i]) for row in rows) for i in range(4)]
    for row in rows:
        cells = [cell.ljust(width) for cell, width in zip(row[:4], widths, strict=True)]
        print("  ".join([*cells, row[4]]).rstrip())
    return 0
