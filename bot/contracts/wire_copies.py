"""The TUI's copies of the service's Structs, rendered as source (bot/contracts/tasks_wire.py,
chat_sessions_wire.py and events_wire.py say which and why): the TUI imports only its own
package, so it carries copies, generated so that a field renamed or dropped in the service
cannot silently leave it behind (tests/test_tui_*_wire.py fail when a copy is stale).

A copy is read by an older TUI from a newer service, so it differs from the original in
these ways only: unknown keys are ignored (the originals refuse them), a field declared as
one of a few words (a `Literal` or a `StrEnum`) is read as `str` (a newer service may add a
word), `object` is written `Any` (any JSON), and a TypedDict named in `keys` keeps only those
keys (a message's stored `meta`: the TUI reads five of its keys, and older rows may lack
others). Names, keys on the wire, order, defaults and other types are the originals', and so
are a tagged union's tags (a chat turn's frames): a union named in `unions` is rendered as
the same alias of the copies, which one msgspec decoder reads by its tag.
"""

from __future__ import annotations

import enum
import json
import sys
import textwrap
import types
import typing
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

import msgspec

ROOT = Path(__file__).resolve().parents[2]
LINE_LENGTH = 100  # ruff's, as pyproject.toml sets it
BASE = "_Wire"  # the copies' base: it ignores unknown keys


@dataclass(frozen=True)
class WireCopy:
    """What to copy from one contracts module, and how the generated file introduces it."""

    module: types.ModuleType  # where the originals are declared (the copy keeps their order)
    roots: tuple[type, ...]  # what the TUI decodes; everything they name comes along
    tui_file: Path
    docstring: str  # the generated module's, whole
    base_doc: str  # the base class's one line
    typing_import: str = ""  # what the generated module imports from typing (if anything)
    # TypedDicts copied in part: the keys the TUI reads, in the original's order.
    keys: Mapping[type, tuple[str, ...]] = field(default_factory=dict)
    # Tagged unions, by the alias the copy declares: their members are roots too, and the
    # alias follows the classes (`Frame = StatusFrame | ...`, in the original's order).
    unions: Mapping[str, object] = field(default_factory=dict)

    # What each copy's module offers (`python -m bot.contracts.X_wire` runs `write`, the
    # tests compare `render_python()` with `tui_file`), said once here for all of them.
    def wire_types(self) -> list[type]:
        return wire_types(self)

    def render_python(self) -> str:
        return render_python(self)

    def write(self) -> int:
        """Writes the copy where it differs from what is rendered (`make wire`)."""
        return write_files({self.tui_file: self.render_python()})


def _is_struct(kind: object) -> typing.TypeGuard[type[msgspec.Struct]]:
    return isinstance(kind, type) and issubclass(kind, msgspec.Struct)


def _is_typed_dict(kind: object) -> bool:
    return isinstance(kind, type) and typing.is_typeddict(kind)


def _is_word(kind: object) -> bool:
    """A StrEnum: one of a few words on the wire."""
    return isinstance(kind, type) and issubclass(kind, enum.Enum) and issubclass(kind, str)


def _type(kind: object) -> str:
    """A field's type as source text."""
    if kind is type(None):
        return "None"
    if kind in (int, str, float, bool):
        return typing.cast(type, kind).__name__
    if kind is object:
        return "Any"
    if kind is msgspec.UnsetType:
        return "msgspec.UnsetType"
    if _is_word(kind):
        return "str"
    origin = typing.get_origin(kind)
    if origin is typing.Annotated:
        return _type(typing.get_args(kind)[0])  # the description is the API doc's
    if origin is typing.Literal:
        if {type(arg) for arg in typing.get_args(kind)} != {str}:
            raise TypeError(f"no TUI rendering for {kind!r}")
        return "str"
    if origin in (typing.Union, types.UnionType):
        return " | ".join(_type(arg) for arg in typing.get_args(kind))
    if origin is list:
        return f"list[{_type(typing.get_args(kind)[0])}]"
    if origin is tuple and len(args := typing.get_args(kind)) == 2 and args[1] is Ellipsis:
        return f"tuple[{_type(args[0])}, ...]"
    if origin is dict:
        key, value = typing.get_args(kind)
        return f"dict[{_type(key)}, {_type(value)}]"
    if _is_struct(kind) or _is_typed_dict(kind):
        return typing.cast(type, kind).__name__
    raise TypeError(f"no TUI rendering for the field type {kind!r}")


def _hints(kind: type, keys: Mapping[type, tuple[str, ...]]) -> dict[str, typing.Any]:
    """A class's fields and their types; of a TypedDict copied in part, the keys named."""
    hints = typing.get_type_hints(kind)
    if kind not in keys:
        return hints
    missing = [key for key in keys[kind] if key not in hints]
    if missing:  # renamed or dropped by the service: the TUI would read nothing there
        raise TypeError(f"{kind.__name__} has no key {', '.join(missing)}: the TUI reads it")
    return {name: hint for name, hint in hints.items() if name in keys[kind]}


def _references(kind: type, copy: WireCopy) -> list[type]:
    """The Structs and TypedDicts a class's fields name, and its base."""
    found: list[type] = [base for base in kind.__bases__ if _is_struct(base)]
    pending = list(_hints(kind, copy.keys).values())
    while pending:
        hint = pending.pop()
        if _is_struct(hint) or _is_typed_dict(hint):
            found.append(hint)
        pending.extend(typing.get_args(hint))
    return found


def wire_types(copy: WireCopy) -> list[type]:
    """What the roots need, in declaration order (bases come first): those of the modules
    `copy.module` imports them from (a hit, a turn's metadata) first, then its own."""
    needed: set[type] = set()
    pending = [*copy.roots, *(kind for union in copy.unions.values() for kind in _members(union))]
    while pending:
        kind = pending.pop()
        if kind in needed or kind is msgspec.Struct or kind.__name__ == BASE:
            continue
        needed.add(kind)
        pending.extend(_references(kind, copy))
    names = sorted(
        {kind.__module__ for kind in needed}, key=lambda name: (name == copy.module.__name__, name)
    )
    declared = [
        value
        for name in names
        for value in vars(sys.modules[name]).values()
        if isinstance(value, type) and value.__module__ == name  # not what it imports
    ]
    return [kind for kind in declared if kind in needed]


def _members(union: object) -> tuple[type[msgspec.Struct], ...]:
    """A tagged union's Structs; anything else has no TUI rendering."""
    members = typing.get_args(union)
    tags = [m.__struct_config__.tag_field if _is_struct(m) else None for m in members]
    if len(members) < 2 or None in tags or len(set(tags)) != 1:
        raise TypeError(f"no TUI rendering for the union {union!r}: not one tagged union")
    return typing.cast(tuple[type[msgspec.Struct], ...], members)


def _doc(kind: type) -> list[str]:
    """The first sentence of the original's docstring, wrapped as `ruff` allows."""
    if kind.__doc__ in (None, msgspec.Struct.__doc__, dict.__doc__):
        return []
    paragraph = " ".join(kind.__doc__.strip().split("\n\n")[0].split())
    sentence = paragraph.split(". ")[0].rstrip(".") + "."
    lines = textwrap.wrap(f'"""{sentence}"""', LINE_LENGTH - 4)
    return ["".join(f"    {line}\n" for line in lines) + "\n"]


def _value(value: object) -> str:
    """A default as `ruff format` writes it (double-quoted strings)."""
    if value is msgspec.UNSET:
        return "msgspec.UNSET"
    return json.dumps(value) if isinstance(value, str) else repr(value)


def _field_line(info: msgspec.structs.FieldInfo) -> str:
    if info.default_factory is not msgspec.NODEFAULT:
        raise TypeError(f"no TUI rendering for {info.name}'s default factory")
    given = info.default is not msgspec.NODEFAULT
    default = f" = {_value(info.default)}" if given else ""
    if info.encode_name != info.name:
        keyword = f"default={_value(info.default)}, " if given else ""
        default = f" = msgspec.field({keyword}name={_value(info.encode_name)})"
    return f"    {info.name}: {_type(info.type)}{default}\n"


def _options(kind: type[msgspec.Struct], base: type[msgspec.Struct]) -> str:
    """The struct options a class sets beyond its base's, as class keywords: the tag field
    and tag of a tagged union's member (a tag left to its default is the class's name, as in
    the copy), leaving defaults off the wire (the copy encodes as the original does), and
    keyword-only fields."""
    config, inherited = kind.__struct_config__, base.__struct_config__
    if config.array_like:
        raise TypeError(f"no TUI rendering for {kind.__name__}'s struct options")
    options = []
    if config.tag_field != inherited.tag_field:
        options.append(f"tag_field={_value(config.tag_field)}")
    if config.tag_field is not None and config.tag != kind.__name__:
        if not isinstance(config.tag, str):
            raise TypeError(f"no TUI rendering for {kind.__name__}'s tag {config.tag!r}")
        options.append(f"tag={_value(config.tag)}")
    if config.omit_defaults != inherited.omit_defaults:
        options.append(f"omit_defaults={config.omit_defaults!r}")
    if _keyword_only(kind, base):
        options.append("kw_only=True")
    return "".join(f", {option}" for option in options)


def _keyword_only(kind: type[msgspec.Struct], base: type[msgspec.Struct]) -> bool:
    """Whether the fields a class adds are keyword-only (`kw_only=True`, which lets a base's
    defaulted field come before its subclasses' required ones): msgspec leaves them out of
    `__match_args__`, and the option covers all of a class's own fields."""
    own = [name for name in kind.__struct_fields__ if name not in base.__struct_fields__]
    return bool(own) and all(name not in kind.__match_args__ for name in own)


def _struct(kind: type[msgspec.Struct]) -> str:
    base = next(b for b in kind.__bases__ if _is_struct(b))
    inherited = set(base.__struct_fields__)
    parent = BASE if base is msgspec.Struct else base.__name__
    header = f"class {kind.__name__}({parent}{_options(kind, base)}):\n"
    fields = [
        _field_line(info) for info in msgspec.structs.fields(kind) if info.name not in inherited
    ]
    if fields:
        return "".join([header, *_doc(kind), *fields])
    doc = "".join(_doc(kind)).rstrip("\n")  # a class of a docstring only: no blank line after
    return header + (f"{doc}\n" if doc else "    pass\n")


def _typed_dict(kind: type, copy: WireCopy) -> str:
    hints = _hints(kind, copy.keys)
    required = typing.cast(frozenset[str], getattr(kind, "__required_keys__", frozenset()))
    optional = typing.cast(frozenset[str], getattr(kind, "__optional_keys__", frozenset()))
    required, optional = required & hints.keys(), optional & hints.keys()
    if required and optional:
        raise TypeError(f"no TUI rendering for {kind.__name__}: some keys required, some not")
    total = "" if required or not optional else ", total=False"
    lines = [f"class {kind.__name__}(TypedDict{total}):\n", *_doc(kind)]
    lines += [f"    {name}: {_type(hint)}\n" for name, hint in hints.items()]
    return "".join(lines)


def render_python(copy: WireCopy) -> str:
    """The generated module, formatted as `ruff format` leaves it."""
    classes = [f'class {BASE}(msgspec.Struct):\n    """{copy.base_doc}"""\n']
    for kind in wire_types(copy):
        if _is_struct(kind):
            classes.append(_struct(kind))
        else:
            classes.append(_typed_dict(kind, copy))
    aliases = "".join(f"\n\n{_alias(name, union)}" for name, union in copy.unions.items())
    return (
        f'"""{copy.docstring}"""\n\n'
        "from __future__ import annotations\n\n"
        + (f"from typing import {copy.typing_import}\n\n" if copy.typing_import else "")
        + "import msgspec\n\n\n"
        + "\n\n".join(classes)
        + aliases
    )


def _alias(name: str, union: object) -> str:
    """`Name = A | B | C`, wrapped in parentheses as `ruff format` does when it is long."""
    members = " | ".join(kind.__name__ for kind in _members(union))
    line = f"{name} = {members}\n"
    if len(line) <= LINE_LENGTH:
        return line
    return f"{name} = (\n    {members}\n)\n"


def write_files(rendered: Mapping[Path, str]) -> int:
    """Writes each generated file where it differs from what is rendered (`make wire`): a
    file already current keeps its modification time."""
    for path, text in rendered.items():
        if not path.exists() or path.read_text() != text:
            path.write_text(text)
            print(f"wrote {path.relative_to(ROOT)}")
    return 0
