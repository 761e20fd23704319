"""How a TUI copy of a service Struct differs from the original, field by field, and in its
tag when it is a member of a tagged union (tests/test_tui_tasks_wire.py,
tests/test_tui_sessions_wire.py)."""

from __future__ import annotations

import typing
from typing import Any

import msgspec


def _shape(kind: type, keys: tuple[str, ...] | None = None) -> list[tuple[str, str, bool]]:
    """(name, key on the wire, required) of each field, in order; of a TypedDict the TUI
    copies in part, the `keys` it copies."""
    if typing.is_typeddict(kind):
        required = typing.cast(frozenset[str], getattr(kind, "__required_keys__", frozenset()))
        names = [name for name in typing.get_type_hints(kind) if keys is None or name in keys]
        return [(name, name, name in required) for name in names]
    fields = msgspec.structs.fields(typing.cast(type[msgspec.Struct], kind))
    return [(f.name, f.encode_name, f.required) for f in fields]


def _tag(kind: type) -> tuple[str, object] | None:
    """(tag field, tag) of a tagged Struct: the `type` a frame is read by."""
    if typing.is_typeddict(kind):
        return None
    config = typing.cast(type[msgspec.Struct], kind).__struct_config__
    return None if config.tag_field is None else (config.tag_field, config.tag)


def differences(client: type, server: type, keys: tuple[str, ...] | None = None) -> list[str]:
    """How the TUI's class differs from the service's, in its tag and field by field (of a
    TypedDict copied in part, the service's `keys`)."""
    mine, theirs = _shape(client), _shape(server, keys)
    mine_tag, their_tag = _tag(client), _tag(server)
    tag = [] if mine_tag == their_tag else [f"TUI tag {mine_tag} != service tag {their_tag}"]
    return [
        *tag,
        *(f"TUI {a} != service {b}" for a, b in zip(mine, theirs, strict=False) if a != b),
        *(f"only one side has {extra}" for extra in (mine[len(theirs) :] or theirs[len(mine) :])),
    ]


def with_extras(value: Any) -> Any:
    """The JSON with a key no one knows yet added to every object (a newer service's)."""
    if isinstance(value, dict):
        return {**{k: with_extras(v) for k, v in value.items()}, "added_later": {"x": 1}}
    if isinstance(value, list):
        return [with_extras(item) for item in value]
    return value
