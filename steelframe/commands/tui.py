"""`steelframe tui`: the terminal client, the same as `steelframe-tui`."""

from __future__ import annotations

import argparse
import os
from typing import Any

from tui_client.__main__ import add_arguments, run


def register(subparsers: Any) -> None:
    tui = subparsers.add_parser("tui")
    add_arguments(tui)
    tui.set_defaults(handler=cmd_tui)


def cmd_tui(args: argparse.Namespace) -> int:
    return run(args, os.environ, prog="steelframe tui")
