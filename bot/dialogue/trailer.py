"""The STEELFRAME_META trailer: the model's machine-readable last line, never shown.

Format (docs/api.md, the system prompt): the reply, then one final line

    STEELFRAME_META: {"intent": "answer"}

with optional `title`, `body` (work to file) and `decision_body` (a Decision draft).
A missing or malformed trailer is intent `answer`, never an error.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from enum import StrEnum

MARKER = "STEELFRAME_META"


class Intent(StrEnum):
    ANSWER = "answer"
    STATUS = "status"
    DECIDE = "decide"
    FILE_WORK = "file_work"
    OPEN_ISSUE = "open_issue"
    CREATE_ISSUE = "create_issue"
    PROPOSE_WORK = "propose_work"
    FILE_MEMORY = "file_memory"

    @property
    def files_work(self) -> bool:
        return self in FILING_INTENTS


FILING_INTENTS = frozenset(
    {Intent.FILE_WORK, Intent.OPEN_ISSUE, Intent.CREATE_ISSUE, Intent.PROPOSE_WORK}
)


@dataclass(frozen=True)
class Trailer:
    intent: Intent = Intent.ANSWER
    title: str | None = None
    body: str | None = None
    decision_body: str | None = None
    malformed: bool = False


def split_reply(text: str) -> tuple[str, Trailer]:
    """(visible reply, parsed trailer) from a complete model output."""
    index = text.rfind(MARKER)
    if index < 0:
        return text.strip(), Trailer()
    reply = text[:index].rstrip()
    return reply, parse_trailer(text[index + len(MARKER) :])


def parse_trailer(raw: str) -> Trailer:
    raw = raw.lstrip(" :\t").strip()
    if raw.endswith("-->"):  # tolerate models that wrap it in an HTML comment
        raw = raw[:-3].rstrip()
    try:
        data = json.loads(raw)
    except ValueError:
        return Trailer(malformed=True)
    if not isinstance(data, dict):
        return Trailer(malformed=True)
    try:
        intent = Intent(str(data.get("intent", "answer")).strip().lower())
    except ValueError:
        return Trailer(malformed=True)
    return Trailer(
        intent=intent,
        title=_text(data.get("title")),
        body=_text(data.get("body")),
        decision_body=_text(data.get("decision_body") or data.get("decision")),
    )


def render_trailer(trailer: Trailer) -> str:
    data: dict[str, str] = {"intent": trailer.intent.value}
    for key in ("title", "body", "decision_body"):
        value = getattr(trailer, key)
        if value:
            data[key] = value
    return f"{MARKER}: {json.dumps(data, ensure_ascii=False)}"


def _text(value: object) -> str | None:
    if isinstance(value, str) and value.strip():
        return value.strip()
    return None


class TrailerFilter:
    """Streams visible text, holding back anything that may be the start of the trailer.

    Deltas arrive in arbitrary pieces, so a tail that is a prefix of the marker is held until
    the next piece shows whether it is the marker; once the marker is seen, the rest is
    swallowed. `text` is everything fed, for `split_reply` at the end.
    """

    def __init__(self) -> None:
        self._parts: list[str] = []
        self._tail = ""  # not yet shown: at most a possible start of the marker
        self._in_trailer = False

    @property
    def text(self) -> str:
        return "".join(self._parts)

    def feed(self, piece: str) -> str:
        """Visible text released by this piece; work is proportional to the piece."""
        self._parts.append(piece)
        if self._in_trailer:
            return ""
        pending = self._tail + piece
        marker_at = pending.find(MARKER)
        if marker_at >= 0:
            self._in_trailer = True
            self._tail = ""
            return pending[:marker_at]
        held = _held_prefix(pending)
        self._tail = pending[len(pending) - held :] if held else ""
        return pending[: len(pending) - held]

    def flush(self) -> str:
        """At the end of the stream: what was held back and turned out not to be a marker."""
        visible, self._tail = ("" if self._in_trailer else self._tail), ""
        return visible


def _held_prefix(text: str) -> int:
    """Length of the longest tail of `text` that is a proper prefix of the marker."""
    for size in range(min(len(MARKER) - 1, len(text)), 0, -1):
        if MARKER.startswith(text[-size:]):
            return size
    return 0
