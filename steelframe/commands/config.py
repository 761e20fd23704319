"""`steelframe config`: the effective settings, secrets masked: those of serve, worker and
the other commands, or with `--dev` those `steelframe dev` runs on (its own data folder,
database and Redis, the local GitHub sandbox, the demo coding runtime).

A line on stderr says whose settings they are, and names a `dev` running on the data folder
(its dev.lock): an operator who ran `make run` and then `steelframe config` in another
terminal read serve's settings as the ones dev used.
"""

from __future__ import annotations

import argparse
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bot.config import DEFAULT_DATA_DIR, Settings
from steelframe.cli import load_settings
from steelframe.dev_settings import DEV, DevPlan, dev_folders, plan_dev, running_dev

Row = tuple[str, str, str, str, str]  # variable, value, source, default, meaning


@dataclass(frozen=True)
class View:
    """The settings one command runs on, and what to say of them first."""

    rows: list[Row]
    notes: list[str]


def register(subparsers: Any) -> None:
    config = subparsers.add_parser("config")
    config.add_argument(
        "--list",
        action="store_true",
        help="every setting with its value, where it came from, its default and meaning",
    )
    config.add_argument(
        "--dev",
        action="store_true",
        help="the settings `steelframe dev` runs on (its own data folder, database and Redis, "
        "the local GitHub sandbox...) instead of those of serve and worker",
    )
    config.add_argument("--data-dir", type=Path, help="with --dev: dev's --data-dir")
    config.add_argument(
        "--use-configured-services",
        action="store_true",
        help="with --dev: dev's --use-configured-services",
    )
    config.set_defaults(handler=cmd_config)


def cmd_config(args: argparse.Namespace) -> int:
    if not args.dev and (args.data_dir is not None or args.use_configured_services):
        print(
            "steelframe config: --data-dir and --use-configured-services go with --dev",
            file=sys.stderr,
        )
        return 2
    settings = load_settings()
    if args.dev:
        plan = plan_dev(
            settings, data_dir=args.data_dir, use_configured_services=args.use_configured_services
        )
        view = dev_view(plan)
    else:
        view = serve_view(settings)
    for note in view.notes:
        print(f"steelframe config: {note}", file=sys.stderr)
    if not args.list:
        for variable, value, *_ in view.rows:
            print(f"{variable}={value}")
        return 0
    rows = [("VARIABLE", "VALUE", "SOURCE", "DEFAULT", "MEANING"), *view.rows]
    widths = [max(len(row[i]) for row in rows) for i in range(4)]
    for row in rows:
        cells = [cell.ljust(width) for cell, width in zip(row[:4], widths, strict=True)]
        print("  ".join([*cells, row[4]]).rstrip())
    return 0


def serve_view(settings: Settings) -> View:
    """Serve's and worker's settings, and a `dev` running here said not to use them."""
    notes = ["the settings of serve, worker and the other commands (dev's: config --dev)"]
    for folder in dev_folders(settings):
        dev = running_dev(folder)
        if dev is not None:
            option = "" if folder == DEFAULT_DATA_DIR.resolve() else f" --data-dir {folder}"
            at = f" at {dev.url}" if dev.url else ""
            notes.append(
                f"a steelframe dev (pid {dev.pid}) runs on the data folder {folder}{at}, on "
                f"settings of its own, not these: `steelframe config --dev{option}` shows them"
            )
    return View(settings.described(), notes)


def dev_view(plan: DevPlan) -> View:
    """Dev's settings; a variable it sets once it has started a service of its own (Redis,
    the GitHub sandbox) shows what sets it."""
    folder = plan.settings.data_dir
    rows = [
        (variable, f"({plan.started[variable]})", DEV, default, meaning)
        if variable in plan.started
        else (variable, value, source, default, meaning)
        for variable, value, source, default, meaning in plan.settings.described()
    ]
    dev = running_dev(folder)
    if dev is None:
        running = f"none runs on {folder} now"
    elif dev.url is None:
        running = f"the one running on {folder} is pid {dev.pid}, still starting"
    else:
        running = f"the one running on {folder} is pid {dev.pid}, at {dev.url}"
    notes = [f"the settings steelframe dev runs on ({running})"]
    if plan.ignored:
        notes.append(
            f"dev does not use {', '.join(plan.ignored)} of this shell: it keeps its own "
            "(--use-configured-services uses them)"
        )
    return View(rows, notes)
