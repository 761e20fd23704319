"""The chat `command` runtime's own protocol, `steelframe.chat.v1` (docs/runtimes.md,
"`command`"), as msgspec Structs: the request written to the command's stdin, and the JSON
lines it writes back, a tagged union on `type`.

The command is any program (a wrapper around a coding CLI, a script), so its lines are
decoded as the model providers' are (bot/runtimes/anthropic_wire.py): keys a line's type
does not have are ignored, a type this protocol does not have is skipped (`TaggedDecoder`
gives None for it; the protocol says any other JSON object is ignored), and a line of one of
these types in a shape the protocol does not have (a required key missing, `null`, a value
of another type, a negative count) is a `msgspec.ValidationError` naming the key. No field is
a `Literal` or an enum: msgspec's one message that quotes the refused value is about those,
so an error never echoes what the command printed.
"""

from __future__ import annotations

import json
from typing import Annotated

import msgspec

from bot.contracts.tagged_json import TaggedDecoder

PROTOCOL = "steelframe.chat.v1"

# -- the request (stdin) ------------------------------------------------------------------


class RequestMessage(msgspec.Struct, frozen=True):
    role: str  # user | assistant: the system prompt is the request's `system`
    content: str


class ChatRequest(msgspec.Struct, frozen=True, kw_only=True):
    """The one object written to the command's stdin, keys in this order."""

    protocol: str = PROTOCOL
    model: str
    system: str
    messages: list[RequestMessage]  # compacted to the window; the operator's message last
    max_output_tokens: int
    checkout: str  # the absolute path of the checkout (also the command's working directory)

    def line(self) -> bytes:
        """The request as written: `json.dumps` of the object (`", "` / `": "` separators,
        ASCII escapes, keys in field order) and a newline, as commands have always read it."""
        return json.dumps(msgspec.to_builtins(self)).encode() + b"\n"


# -- the command's lines (stdout) ---------------------------------------------------------

Count = Annotated[int, msgspec.Meta(ge=0)]


class _Line(msgspec.Struct, frozen=True, tag_field="type"):
    pass


class ThinkingLine(_Line, frozen=True, tag="thinking"):
    text: str  # an empty text says nothing: skipped


class DeltaLine(_Line, frozen=True, tag="delta"):
    text: str  # reply text, the `STEELFRAME_META` trailer line included


class StatusLine(_Line, frozen=True, tag="status"):
    text: str


class UsageLine(_Line, frozen=True, tag="usage"):
    """Tokens of this call; several lines add up. A count left out is 0."""

    input_tokens: Count = 0
    output_tokens: Count = 0


class RouteLine(_Line, frozen=True, tag="route"):
    model: str  # the model that actually answered (metadata)


class ErrorLine(_Line, frozen=True, tag="error"):
    message: str = ""  # the turn fails with it ("an error" when it is empty)


class DoneLine(_Line, frozen=True, tag="done"):
    """The answer is complete (optional: exiting 0 says the same)."""


ChatLine = ThinkingLine | DeltaLine | StatusLine | UsageLine | RouteLine | ErrorLine | DoneLine

LINES: TaggedDecoder[ChatLine] = TaggedDecoder(ChatLine)


class LineType(msgspec.Struct, frozen=True):
    """Only a line's `type`, whatever JSON it is (absent: None): which dialect it speaks,
    if any. Decoding fails only for what is not a JSON object (reply text)."""

    type: object = None


LINE_TYPE = msgspec.json.Decoder(LineType)
