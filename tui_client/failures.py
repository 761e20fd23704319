"""How a failed request shows: the operator's words for it, whether it means the service is
offline, and the end of a worker whose widgets went with the app."""

from __future__ import annotations

import enum
import functools
from collections.abc import Awaitable, Callable
from typing import Concatenate, Final, ParamSpec, TypeVar

from textual.css.query import NoMatches
from textual.widget import MountError, Widget

from tui_client.api import ApiError, ServiceUnreachable, UnexpectedAnswer
from tui_client.sse import SseError

P = ParamSpec("P")
W = TypeVar("W", bound=Widget)
# What a request can end with that is the service's doing, not the TUI's: shown, never raised.
TRANSPORT_ERRORS = (ApiError, ServiceUnreachable, UnexpectedAnswer, SseError)


class Unanswered(enum.Enum):
    """A request that failed; the failure is already on the screen."""

    UNANSWERED = enum.auto()


UNANSWERED: Final = Unanswered.UNANSWERED


def describe(exc: Exception) -> str:
    """An error as the operator should read it: what happened and what to do."""
    if isinstance(exc, ServiceUnreachable):
        return f"{exc}. Is `steelframe serve` or `steelframe dev` running? Check --url."
    if isinstance(exc, ApiError) and exc.unauthorized:
        return f"The service refused the operator token ({exc.message}). Check --token."
    if isinstance(exc, ApiError) and exc.status == 404 and exc.code == "http_error":
        # A 404 that is not the service's JSON error (`_api_error`): another web server
        # answers at that address (a wrong port, the GitHub sandbox's), not Steelframe.
        return (
            f"{exc.message} ({exc.status}): the address answers, but not as a Steelframe"
            " service does. Check --url."
        )
    if isinstance(exc, ApiError):
        return f"{exc.message} ({exc.status} {exc.code})"
    return f"The service sent something unreadable: {exc}"


def in_short(exc: Exception) -> str:
    """A failure in a few words, for a narrow place that says what did not load (the
    transcript says it whole)."""
    if (reason := offline_reason(exc)) is not None:
        return reason
    if isinstance(exc, ApiError):
        return str(exc.status)
    return "an unreadable answer"


def offline_reason(exc: Exception) -> str | None:
    """Why the service is unusable, when the failure says it is (the status line shows it)."""
    if isinstance(exc, ServiceUnreachable):
        return "service unreachable"
    if isinstance(exc, ApiError) and exc.unauthorized:
        return "token refused"
    return None


async def unless_unmounted(widget: Widget, work: Awaitable[None]) -> None:
    """For workers: when the app shuts down under a request in flight, the widgets it would
    update are already gone; that is the end of the work, not an error."""
    try:
        await work
    except (NoMatches, MountError):
        if widget.app.is_running and widget.is_attached:
            raise


def while_mounted(
    fn: Callable[Concatenate[W, P], Awaitable[None]],
) -> Callable[Concatenate[W, P], Awaitable[None]]:
    """`unless_unmounted` for a widget's own worker method."""

    @functools.wraps(fn)
    async def run(widget: W, /, *args: P.args, **kwargs: P.kwargs) -> None:
        await unless_unmounted(widget, fn(widget, *args, **kwargs))

    return run
