"""How long a test waits for what a loaded machine makes slow before calling it a hang, and
`wait_for`, the poll that waits for a condition.

Its own module, importing nothing of the project, so `tests/conftest.py` (the sandbox's
`settle`), `tests/fakes/lifecycle.py` (which imports conftest) and `tests/fakes/sandbox.py`
(which lifecycle imports) share them."""

import asyncio
import time
from collections.abc import Callable
from typing import Any

# For webhooks to settle, sandboxed runs to start, processes to die or exit, workers and
# services to answer, events to arrive (`wait_for(..., within=PATIENCE_SECONDS)`, `gone`,
# `EventsFeed`). A clean-clone CI run at a load average of 20 took more than 10 s for what
# takes a second or two on a quiet machine; only a test that fails waits this long. Not for
# a wait whose outcome something else would bring about meanwhile (a product timeout of 30 s
# and more, a lease, a sleeper's own end): such a wait must end first, so it names its own
# bound and says why; `wait_for`'s 10 s default is one.
PATIENCE_SECONDS = 60.0


async def wait_for(predicate: Callable[[], Any], *, within: float = 10.0) -> Any:
    """Poll (briefly) until `predicate()` is truthy; its value, or AssertionError."""
    deadline = time.monotonic() + within
    while True:
        value = await asyncio.to_thread(predicate)
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError("condition not met in time")
        await asyncio.sleep(0.05)
