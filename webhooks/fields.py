"""What intake reads of a payload before the answer, read without building the payload.

Before acknowledging, intake needs a few values: the action, `installation.id`,
`repository.full_name` and what the routed handlers need (`webhooks.routing.handles`).
Parsing the whole 8 KB `issues` payload into hundreds of objects and freeing them again
was ~12% of the event loop's time per delivery (bench/README.md, "Webhook intake beside
Probot"); processing parses the stored text again anyway. msgspec decodes into a struct
that names only those paths: it checks the whole document's syntax but builds only the
values read (~3x less CPU on the benchmark's payload).

Only a payload this way reads exactly as `orjson.loads` + `routing.lookup` would is
answered from it; for anything else `read` returns None and the receiver parses in full, as
before, with the same answers and messages: not UTF-8, not JSON, not an object, a value on
a path that is neither an object nor null, an integer orjson would read as a float, an
action that is not text. One difference remains, by design: a number out of a double's
range (`1e400`) in a part of the payload intake does not read is valid JSON to msgspec but
not to orjson; such a delivery is acknowledged and then dead-lettered by processing ("body
is not JSON") instead of answered 400. GitHub sends no such numbers.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import msgspec
from gidgethub.routing import Router

from webhooks.content_keys import key_paths
from webhooks.routing import lookup, needs_for, problems

# Read for every delivery: the columns of the delivery log (`receiver._new_delivery`); and
# per event, what its content key reads (`webhooks.content_keys`).
ALWAYS = ("action", "installation.id", "repository.full_name")
# orjson reads integers outside this range as floats (a need for an int would then fail).
_INT_RANGE = range(-(2**63), 2**64)


class Fields:
    """The values at the paths read, by dotted path; None for absent or null."""

    __slots__ = ("_values",)

    def __init__(self, values: dict[str, Any]) -> None:
        self._values = values

    def get(self, path: str) -> Any:
        return self._values.get(path)


class FieldReader:
    """Reads the fields of one router's deliveries. The paths read for an event grow as
    its actions are seen (the needs depend on the action, known only after reading it), so
    a delivery is decoded once, or twice the first time its action brings a new path."""

    def __init__(self, router: Router) -> None:
        self._router = router
        self._shapes: dict[str, _Shape] = {}

    def read(self, event: str, body: bytes) -> tuple[Fields, list[str]] | None:
        """The fields and the problems with what the routed handlers need (as
        `routing.missing_needs` words them), or None: parse the payload in full instead."""
        shape = self._shapes.get(event) or self._reshape(event, ALWAYS + key_paths(event))
        values = shape.decode(body)
        if values is None:
            return None
        action = values.get("action")
        if action is not None and not isinstance(action, str):
            return None  # routed by gidgethub's own rules: take the full parse
        needs = needs_for(self._router, event, action)
        if not shape.covers(needs):
            shape = self._reshape(event, (path for path, _ in needs))
            values = shape.decode(body)
            if values is None:
                return None
        fields = Fields(values)
        return fields, problems(needs, fields.get)

    def _reshape(self, event: str, paths: Iterable[str]) -> _Shape:
        known = self._shapes[event].paths if event in self._shapes else frozenset(ALWAYS)
        shape = _Shape(known | frozenset(paths))
        self._shapes[event] = shape
        return shape


class _Shape:
    """A msgspec struct type naming `paths` (nested structs down to each path's last key,
    whose value is decoded whole), and how to take each path's value from a decoded one."""

    def __init__(self, paths: frozenset[str]) -> None:
        self.paths = paths
        self._covered: dict[tuple[tuple[str, type], ...], bool] = {}
        tree: dict[Any, Any] = {}
        for path in sorted(paths):
            node = tree
            for key in path.split("."):
                node = node.setdefault(key, {})
            node[_LEAF] = True
        self._decoder: msgspec.json.Decoder[Any] = msgspec.json.Decoder(_struct(tree))
        # Each path: the struct attributes down to the first value decoded whole, then the
        # keys below it looked up in that value (a path under another path read).
        self._steps = {path: _steps(tree, path.split(".")) for path in paths}

    def covers(self, needs: tuple[tuple[str, type], ...]) -> bool:
        known = self._covered.get(needs)
        if known is None:  # one answer per (event, action): needs_for caches the tuple
            known = self._covered[needs] = all(path in self.paths for path, _ in needs)
        return known

    def decode(self, body: bytes) -> dict[str, Any] | None:
        try:
            root = self._decoder.decode(body)
        except (msgspec.MsgspecError, RecursionError):
            return None
        values: dict[str, Any] = {}
        for path, (attributes, rest) in self._steps.items():
            value: Any = root
            for attribute in attributes:
                value = getattr(value, attribute)
                if value is None:
                    break
            if rest and value is not None:
                value = lookup(value, ".".join(rest))
            if type(value) is int and value not in _INT_RANGE:
                return None
            values[path] = value
        return values


_LEAF = object()  # marks, in the tree of paths, a node some path ends at


def _struct(tree: dict[Any, Any]) -> type:
    """A struct with a field per key of `tree`: Any where a path ends (decoded whole), else
    a nested struct or null. A value of any other JSON type there fails the decode."""
    fields = []
    rename = {}
    for index, (key, node) in enumerate(sorted((k, v) for k, v in tree.items() if k is not _LEAF)):
        name = f"f{index}"
        rename[name] = key
        kind: Any = Any if _LEAF in node else _struct(node) | None
        fields.append((name, kind, None))
    return msgspec.defstruct("Read", fields, rename=rename, forbid_unknown_fields=False)


def _steps(tree: dict[Any, Any], keys: list[str]) -> tuple[list[str], list[str]]:
    attributes = []
    node = tree
    for depth, key in enumerate(keys):
        names = sorted(k for k in node if k is not _LEAF)
        attributes.append(f"f{names.index(key)}")
        node = node[key]
        if _LEAF in node:
            return attributes, keys[depth + 1 :]
    return attributes, []
