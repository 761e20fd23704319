"""The event loop `serve` runs on: uvloop when it is installed (a dependency everywhere
but Windows, where it does not exist), asyncio's own otherwise; `serve --loop asyncio`
chooses asyncio's.

uvloop (libuv) does the loop's and its transports' work in C: on the webhook benchmark
(bench/webhooks_probot.py) ~10% less CPU per delivery than asyncio's loop, once the
webhook path itself was trimmed (before that the difference was within the noise).
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
        raise LoopUnavailable("uvloop is not installed: pip install uvloop (not on Windows)")
    return uvloop.new_event_loop
