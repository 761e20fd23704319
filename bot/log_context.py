"""Ids that every log line of the current piece of work carries (request, delivery, task,
turn), kept in a context variable so they follow the work across awaits and threads started
with `asyncio.to_thread` (which copies the context)."""

from __future__ import annotations

import contextlib
import contextvars
from collections.abc import Iterator, Mapping
from types import MappingProxyType

_IDS: contextvars.ContextVar[Mapping[str, str]] = contextvars.ContextVar(
    "log_ids", default=MappingProxyType({})
)
KNOWN_IDS = ("request_id", "delivery_id", "task_id", "turn_id", "session_id", "operator")


def current_ids() -> Mapping[str, str]:
    return _IDS.get()


@contextlib.contextmanager
def log_ids(**ids: object) -> Iterator[None]:
    """Within the block, log lines carry these ids too (None values are left out)."""
    token = _IDS.set({**_IDS.get(), **{k: str(v) for k, v in ids.items() if v is not None}})
    try:
        yield
    finally:
        _IDS.reset(token)


def bind_id(name: str, value: str) -> None:
    """`bind_ids` for one id that is already text: once per HTTP request, so kept cheap."""
    _IDS.set({**_IDS.get(), name: value})


def bind_ids(**ids: object) -> None:
    """From here to the end of the current task (a request handler, a job), log lines carry
    these ids; the next task starts from its own copy of the context."""
    _IDS.set({**_IDS.get(), **{k: str(v) for k, v in ids.items() if v is not None}})
