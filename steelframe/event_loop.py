"""The event loop `serve` runs on: uvloop when it is installed (`pip install
steelframe[fast]`), asyncio's own otherwise; `serve --loop asyncio` chooses asyncio's.

uvloop (libuv) does the loop's and its transports' work in C, but on the webhook benchmark
(bench/webhooks_probot.py) it made no measurable difference to a delivery's cost, so it is
optional rather than a dependency. It does not exist on Windows.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable

try:
    import uvloop
except ImportError:  # not installed, or a platform it does not support (Windows)
    uvloop = None  # type: ignore[assignment]

CHOICES = ("auto", "uvloop", "asyncio")


class LoopUnavailable(RuntimeError):
    pass


def loop_factory(choice: str = "auto") -> Callable[[], asyncio.AbstractEventLoop] | None:
    """The factory for `asyncio.Runner`; None means asyncio's default loop."""
    if choice == "asyncio" or (choice == "auto" and uvloop is None):
        return None
    if uvloop is None:
        raise LoopUnavailable("uvloop is not installed: pip install 'steelframe[fast]'")
    return uvloop.new_event_loop
