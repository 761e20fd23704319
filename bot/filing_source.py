"""Which client a filing came from, for its issue's `steelframe:from-*` label.

A client names itself in the `X-Steelframe-Client` header (`tui`, `gui`); a request without
it (curl, a script, any other API client) is `api`. The label only says where the operator
typed: it grants nothing, so a client that names itself wrongly only mislabels its own
issue. The operator API binds the client when a request that can file arrives (a chat turn,
the File button); the value follows the turn into the tasks it starts (a context variable),
and `FilingService` reads it when it labels the issue."""

from __future__ import annotations

from contextvars import ContextVar
from enum import StrEnum

CLIENT_HEADER = "X-Steelframe-Client"
LABEL_PREFIX = "steelframe:from-"


class FilingClient(StrEnum):
    TUI = "tui"
    GUI = "gui"
    API = "api"

    @property
    def label(self) -> str:
        return f"{LABEL_PREFIX}{self.value}"


SOURCE_LABELS = tuple(client.label for client in FilingClient)
_current: ContextVar[FilingClient] = ContextVar("filing_client", default=FilingClient.API)


def client_named(value: str | None) -> FilingClient:
    """The client a header names; anything else (absent, unknown) is a plain API client."""
    try:
        return FilingClient((value or "").strip().lower())
    except ValueError:
        return FilingClient.API


def bind_client(value: str | None) -> FilingClient:
    """Note the client of the request being handled (and of the turn it starts)."""
    client = client_named(value)
    _current.set(client)
    return client


def current_client() -> FilingClient:
    return _current.get()


def source_label_of(labels: list[str]) -> str:
    """The `from-*` label among an issue request's labels (a filing stored before there was
    more than one: `from-tui`)."""
    return next((name for name in labels if name in SOURCE_LABELS), FilingClient.TUI.label)
