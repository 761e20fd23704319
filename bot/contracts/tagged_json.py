"""JSON at the seams where the other side owns the format (a model provider's wire, a coding
agent's output lines): the alias for payloads that are arbitrary JSON, and the decoding of
tagged frames, where a tag this client does not know is skipped.

Providers and agent CLIs add event, block and item types over time (Anthropic's versioning
policy says new variants of enum-like output values, streaming event types among them, may
appear; Claude Code and Codex add line types between releases), so an unknown tag is not an
error: `TaggedDecoder.decode` gives None for it. A known tag with the wrong shape, a frame
without its tag, or text that is not JSON is an error (`msgspec.ValidationError` /
`msgspec.DecodeError`) that names the field, raised at the seam rather than as a KeyError
deep inside a runtime. Here, below both the runtimes and the lifecycle, so both decode with
it (bot/runtimes/wire_json.py passes it on to the runtimes).
"""

from __future__ import annotations

from typing import Any, Generic, TypeVar, cast, get_args

import msgspec

# A JSON object whose shape is the payload itself, not a contract of ours: a tool's JSON
# Schema, the arguments a model wrote for a tool. `object` values: readers narrow them.
JsonObject = dict[str, object]

T = TypeVar("T")


class _Tag(msgspec.Struct):
    """Only the tag of a frame (msgspec skips the other fields without building them)."""

    type: str


_TAG = msgspec.json.Decoder(_Tag)


class TaggedDecoder(Generic[T]):
    """Decodes JSON into one of a union of Structs tagged by a field (`type` unless the
    Structs say otherwise); created once per union (a msgspec decoder is built for its type
    when made)."""

    def __init__(self, union: Any) -> None:
        self._decoder: msgspec.json.Decoder[T] = msgspec.json.Decoder(union)
        members = get_args(union) or (union,)
        configs = [member.__struct_config__ for member in members]
        self.tags = frozenset(config.tag for config in configs)
        field = configs[0].tag_field
        # The tag alone, read when a frame does not decode: known or not, or no tag at all.
        self._tag: msgspec.json.Decoder[_Tag] = (
            _TAG if field == "type" else msgspec.json.Decoder(_tag_struct(field))
        )

    def decode(self, data: bytes | str | msgspec.Raw, *, at: str = "") -> T | None:
        """The frame as its Struct, or None when its tag is not one of the union's. `at`:
        where `data` sits in a larger frame (`$.delta`), named in the error."""
        try:
            return self._decoder.decode(data)
        except msgspec.ValidationError as exc:
            try:
                known = self._tag.decode(data).type in self.tags
            except msgspec.ValidationError as untagged:
                raise _located(untagged, at) from None
            if known:  # a type we know, in a shape we do not: the frame is malformed
                raise _located(exc, at) from None
            return None


def _tag_struct(field: str) -> type[_Tag]:
    """A Struct reading only the tag under another name (`subtype`) into `.type`."""
    renamed = msgspec.defstruct("_Tag", [("type", str)], bases=(_Tag,), rename={"type": field})
    return cast(type[_Tag], renamed)


def _located(exc: msgspec.ValidationError, at: str) -> msgspec.ValidationError:
    return msgspec.ValidationError(f"{exc} (in `{at}`)") if at else exc
