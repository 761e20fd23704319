"""The options of `steelframe worker` and `steelframe reconcile`. Their work is in
worker.py, imported only once one of them runs: `worker --help` loads no lifecycle."""

from __future__ import annotations

import argparse
from typing import Any

from bot.config_values import parse_queue_name
from steelframe.cli import Handler


def register(subparsers: Any) -> None:
    worker = subparsers.add_parser("worker")
    worker.add_argument(
        "--queue", type=_queue_name, help="queue name (default: STEELFRAME_TASK_QUEUE's)"
    )
    worker.add_argument("--burst", action="store_true", help="quit when the queue is empty")
    worker.add_argument(
        "--in-process",
        action="store_true",
        help="run jobs in this process (RQ's SimpleWorker) instead of a forked work horse",
    )
    worker.set_defaults(handler=Handler("steelframe.commands.worker", "cmd_worker"))
    rec = subparsers.add_parser("reconcile")
    rec.add_argument(
        "--queue", type=_queue_name, help="queue name (default: STEELFRAME_TASK_QUEUE's)"
    )
    rec.set_defaults(handler=Handler("steelframe.commands.worker", "cmd_reconcile"))


def _queue_name(value: str) -> str:
    """`--queue` overrides STEELFRAME_TASK_QUEUE, so it is held to the same rule."""
    try:
        return parse_queue_name(value)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(f"{value!r} is not valid: {exc}") from exc
