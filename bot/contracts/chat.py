"""Chat's wire contracts, declared once: the frames of a turn's SSE stream, the ChatResponse,
messages and sessions. The OpenAPI components (operator_api/schemas.py), the GUI's constants
(web_gui/static/wire.js) and the TUI's (tui_client/wire.py) are generated from these Structs
(`steelframe wire`), and a test fails when a generated file is stale.

Frames are a tagged union on `type`. Each frame's JSON keys keep the order of its fields and
leave out the fields at their default (`omit_defaults`), so the bytes on the wire are the
ones the clients have always read. A frame gets its `id` when its turn numbers it
(bot.chat.inflight): the id belongs to the stream, not to what the turn says.

Responses name every key they carry (`forbid_unknown_fields` makes their schemas exact).
This module imports nothing of ours: every layer may use it.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from enum import StrEnum
from typing import Annotated, Literal

import msgspec
from msgspec import UNSET, Meta, Struct, UnsetType

from bot.contracts.hits import RetrievedHit
from bot.contracts.turn_meta import TurnMeta, UsageMeta

Role = Literal["user", "assistant"]
SessionKindName = Literal["chat", "discuss"]
MemoryVerdict = Literal["answers", "nothing", "unavailable"]
FrameType = Literal["status", "thinking", "delta", "done", "error"]
TERMINAL_FRAME_TYPES: frozenset[str] = frozenset({"done", "error"})


class StatusReason(StrEnum):
    """Why a `status` frame was sent, when it is more than a phase: its `reason` (the
    clients' copies are generated from this, web_gui/static/wire.js and tui_client/wire.py)."""

    # Frames of the turn could not be relayed to this reader (Redis was away or lost them,
    # bot/chat/frames.py): what streamed may have skipped a part, the clients keep a warning.
    FRAMES_LOST = "frames_lost"
    # Retrieval failed: the turn answers without memory (`detail` says why).
    RETRIEVE_UNAVAILABLE = "retrieve_unavailable"
    # A dense round could not run: its lexical hits stand (`detail` says why).
    DENSE_UNAVAILABLE = "dense_unavailable"


class ErrorReason(StrEnum):
    """Why a turn ended in an `error` frame: its `reason` (the clients' copies are generated
    from this, web_gui/static/wire.js and tui_client/wire.py; the blocking endpoint's status
    and code follow it, operator_api/chat_routes.py)."""

    # The operator stopped it (POST .../chat/stop): nothing of the turn was saved.
    STOPPED = "stopped"
    # The service stopped it, shutting down: nothing of the turn was saved.
    CANCELLED = "cancelled"
    # The model failed (`error` says how).
    RUNTIME = "runtime"
    # The model did not finish within STEELFRAME_TURN_TIMEOUT_SECONDS.
    TIMEOUT = "timeout"
    # The turn's session was deleted while it ran.
    SESSION_DELETED = "session_deleted"
    # The service failed (its log says how).
    INTERNAL = "internal"


class _Frame(Struct, frozen=True, omit_defaults=True, tag_field="type"):
    """What every frame is: a tagged Struct whose defaults stay off the wire."""


class StatusFrame(_Frame, frozen=True, tag="status"):
    """A live phase of the turn. The first frame of every turn is `turn started`, naming the
    session, the turn and the message (a client re-attaching after a reload shows it)."""

    text: str
    session: str | None = None
    turn_id: str | None = None
    message: str | None = None
    reason: StatusReason | None = None
    detail: str | None = None  # why, in words, with a reason that has one (an error's first line)
    round: int | None = None  # retrieval round
    rounds: int | None = None  # retrieval rounds
    query: str | None = None  # which retrieval query
    hits: int | None = None  # hits the round found
    context: int | None = None  # focus or link context the round added (not hits)


class ThinkingFrame(_Frame, frozen=True, tag="thinking"):
    text: str
    draft: int  # 1, or 2 for the grounded re-draft


class DeltaFrame(_Frame, frozen=True, tag="delta"):
    text: str
    draft: int  # 1, or 2 for the grounded re-draft
    replace: bool = False  # discard the reply text shown so far


class Message(Struct, frozen=True, forbid_unknown_fields=True):
    """One stored message of a session."""

    id: str
    seq: int
    role: Role
    content: str
    reasoning: str | None
    intent: str | None
    # Its TypedDict: the stored object as it is, keys in the order they were written (a
    # TypedDict is a dict when encoded), and the OpenAPI document describes each key.
    meta: TurnMeta | None
    created_at: str


class ChatResponse(Struct, frozen=True, forbid_unknown_fields=True):
    """A finished turn: the reply, what it was grounded on, what it did."""

    reply: str
    intent: str
    session: str
    turn_id: str
    agent: str
    focus: int | None
    history: list[Message]
    retrieve_hits: int
    retrieved: list[RetrievedHit]
    retrieval_available: bool
    memory_verdict: Annotated[
        MemoryVerdict, Meta(description="does session memory answer the question (docs/memory.md)")
    ]
    reasoning: str
    model: str
    usage: UsageMeta
    decision_body: str | None
    decision_issue: int | None
    pending_title: str | None
    pending_body: str | None
    pending_kind: Annotated[
        str | None, Meta(description="what filing the pending proposal makes (e.g. work)")
    ]
    filed_issue_number: int | None
    filed_issue_url: str | None
    filed_task_started: bool
    notes: list[str]


class DoneFrame(_Frame, frozen=True, tag="done"):
    response: ChatResponse


class ErrorFrame(_Frame, frozen=True, tag="error"):
    error: str
    # Every frame this release sends has one; a frame relayed by an older release may not.
    reason: ErrorReason | None = None


Frame = StatusFrame | ThinkingFrame | DeltaFrame | DoneFrame | ErrorFrame
# Where a turn's steps send their frames (its TurnHandle numbers and streams them).
Emit = Callable[[Frame], Awaitable[None]]
FRAME_TYPES: tuple[type[_Frame], ...] = (
    StatusFrame,
    ThinkingFrame,
    DeltaFrame,
    DoneFrame,
    ErrorFrame,
)


class SessionDecision(Struct, frozen=True, forbid_unknown_fields=True):
    body: str
    issue: int


class PendingProposal(Struct, frozen=True, forbid_unknown_fields=True):
    """The filing proposal waiting for the operator's yes."""

    title: str
    body: str | None
    kind: str | None


PENDING = "the filing proposal waiting for the operator's yes"


class SessionSummary(Struct, frozen=True, forbid_unknown_fields=True):
    id: str
    title: str | None
    label: Annotated[
        str,
        Meta(
            description="what a sidebar shows: the subject a filing asked for, else the title,"
            " else the summary's first sentence (bot/chat/session_label.py)"
        ),
    ]
    kind: SessionKindName
    agent: str
    focus: int | None
    created_at: str
    last_activity_at: str
    closed_at: str | None
    summary: str | None
    summary_status: str
    decision: SessionDecision | None
    pending: Annotated[
        PendingProposal | None,
        Meta(description="the filing proposal waiting for the operator's yes"),
    ]
    turns: int | None
    active: bool


class Session(SessionSummary, frozen=True, forbid_unknown_fields=True):
    messages: list[Message]
    turn_in_flight: Annotated[
        str | None,
        Meta(
            description="the id of the turn still running in this session, to re-attach to"
            " (GET /api/operator/chat/stream?turn=); null when none"
        ),
    ]


class NewSession(SessionSummary, frozen=True, forbid_unknown_fields=True):
    previous_session: Annotated[
        str | None,
        Meta(description="the session this one closed (its summary is being made)"),
    ]


class ListedSession(SessionSummary, frozen=True, forbid_unknown_fields=True):
    """A session as the sidebar lists it."""

    unseen: Annotated[
        bool, Meta(description="a task result arrived since the operator last opened it")
    ]


class Sessions(Struct, frozen=True, forbid_unknown_fields=True):
    sessions: list[ListedSession]


class Seen(Struct, frozen=True, forbid_unknown_fields=True):
    """The answer to marking a session seen (bot/chat/unseen.py)."""

    session: str
    unseen: bool


class History(Struct, frozen=True, forbid_unknown_fields=True):
    session: str | None
    messages: list[Message]


class Cleared(Struct, frozen=True, forbid_unknown_fields=True):
    session: str | None
    cleared: int


class Deleted(Struct, frozen=True, forbid_unknown_fields=True):
    deleted: str


class StopResult(Struct, frozen=True, forbid_unknown_fields=True):
    """What a stop did. Without a turn in flight it is only `{"stopped": false}`."""

    stopped: bool
    session: str | UnsetType | None = UNSET
    turn_id: str | UnsetType = UNSET
    reason: Annotated[
        str | UnsetType,
        Meta(
            description="why a turn in flight was not stopped (e.g. finishing: its model had"
            " already answered, so it completes and is kept)"
        ),
    ] = UNSET


# What a chat request may carry: operator_api.chat_routes refuses more (400 naming the
# field), and the OpenAPI document says so from ChatRequest below.
MAX_MESSAGE_CHARS = 32_000
MAX_SESSION_ID_CHARS = 64
MAX_AGENT_NAME_CHARS = 100
MAX_REQUEST_KEY_CHARS = 200  # an idempotency key (Idempotency-Key or request_id)


class ChatRequest(Struct, frozen=True, forbid_unknown_fields=True):
    """A chat turn's request body (validated by operator_api.chat_routes)."""

    message: Annotated[str, Meta(min_length=1, max_length=MAX_MESSAGE_CHARS)]
    session: Annotated[str, Meta(min_length=1, max_length=MAX_SESSION_ID_CHARS)] | None = None
    agent: Annotated[str, Meta(max_length=MAX_AGENT_NAME_CHARS)] | None = None
    focus: Annotated[int, Meta(ge=1)] | None = None
    request_id: (
        Annotated[
            str,
            Meta(
                min_length=1,
                max_length=MAX_REQUEST_KEY_CHARS,
                description="idempotency key (or the Idempotency-Key header): one per message"
                " sent; a send again with it never runs a second turn",
            ),
        ]
        | None
    ) = None


RESPONSE_TYPES: tuple[type[Struct], ...] = (
    ChatRequest,
    ChatResponse,
    Message,
    History,
    SessionSummary,
    ListedSession,
    Session,
    NewSession,
    Sessions,
    Seen,
    Cleared,
    Deleted,
    StopResult,
)

_ENCODER = msgspec.json.Encoder()


def encode(value: Struct) -> bytes:
    """A contract's JSON (compact UTF-8, keys in field order)."""
    return _ENCODER.encode(value)


def encode_frame(frame_id: int, frame: Frame) -> bytes:
    """A numbered frame's JSON, `id` first, as the stream has always carried it."""
    return b'{"id":%d,%s' % (frame_id, _ENCODER.encode(frame)[1:])


class _Numbered(Struct):
    id: int


_FRAME_DECODER = msgspec.json.Decoder(Frame)
_ID_DECODER = msgspec.json.Decoder(_Numbered)


def decode_frame(raw: bytes) -> tuple[int, Frame]:
    """The id and the frame of `encode_frame`'s bytes (a frame relayed through Redis)."""
    return _ID_DECODER.decode(raw).id, _FRAME_DECODER.decode(raw)
