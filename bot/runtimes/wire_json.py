"""JSON at the model-provider seam: the alias for payloads that are arbitrary JSON, and the
decoding of tagged frames, where a tag this client does not know is skipped.

Providers add event, block and delta types over time (Anthropic's versioning policy says
new variants of enum-like output values, streaming event types among them, may appear), so
an unknown tag is not an error: `TaggedDecoder.decode` gives None for it. A known tag with
the wrong shape, a frame without its tag, or text that is not JSON is an error
(`msgspec.ValidationError` / `msgspec.DecodeError`) that names the field, raised at the
seam rather than as a KeyError deep inside a runtime.
"""

from __future__ import annotations

from typing import Any, Generic, TypeVar, get_args

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
    """Decodes JSON into one of a union of Structs tagged by their `type` field; created once
    per union (a msgspec decoder is built for its type when made)."""

    def __init__(self, union: Any) -> None:
        self._decoder: msgspec.json.Decoder[T] = msgspec.json.Decoder(union)
        members = get_args(union) or (union,)
        self.tags = frozenset(member.__struct_config__.tag for member in members)

    def decode(self, data: bytes | str | msgspec.Raw, *, at: str = "") -> T | None:
        """The frame as its Struct, or None when its tag is not one of the union's. `at`:
        where `data` sits in a larger frame (`$.delta`), named in the error."""
        try:
            return self._decoder.decode(data)
        except msgspec.ValidationError as exc:
            try:
                known = _TAG.decode(data).type in self.tags
            except msgspec.ValidationError as untagged:
                raise _located(untagged, at) from None
            if known:  # a type we know, in a shape we do not: the frame is malformed
                raise _located(exc, at) from None
            return None


def _located(exc: msgspec.ValidationError, at: str) -> msgspec.ValidationError:
    return msgspec.ValidationError(f"{exc} (in `{at}`)") if at else exc
