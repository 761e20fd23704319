"""Read-only repository tools over the agent's checkout: list files, read a file, search text.

The checkout is a shared, read-only cache (spec: Chat gotchas), so these are the only tools
a model gets: nothing writes, runs a shell or touches the network. Every path is confined to
the checkout: absolute paths, `..`, `.git` (its config can hold a token) and symlinks that
lead outside are refused. Output is bounded per call and per turn, and enters the model's
context wrapped as untrusted data, because file contents may carry instructions.
"""

from __future__ import annotations

import asyncio
import logging
import os
from collections.abc import Iterator
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path, PurePosixPath, PureWindowsPath

import msgspec

from bot.runtimes.wire_json import JsonObject

log = logging.getLogger(__name__)

MAX_PATH_CHARS = 1024
CALL_OUTPUT_CHARS = 12_000  # one tool result
READ_DEFAULT_LINES = 200
READ_MAX_LINES = 400
LIST_MAX_ENTRIES = 300
SEARCH_MAX_MATCHES = 50
SEARCH_MAX_FILES = 5_000
SEARCH_MAX_FILE_BYTES = 1 << 20
LINE_CHARS = 240
SNIFF_BYTES = 8192
REFUSED_PARTS = frozenset({"..", ".git"})
_OBJECT = msgspec.json.Decoder(JsonObject)


class ToolName(StrEnum):
    LIST_FILES = "list_files"
    READ_FILE = "read_file"
    SEARCH_TEXT = "search_text"


@dataclass(frozen=True)
class ToolSpec:
    name: ToolName
    description: str
    parameters: JsonObject  # JSON Schema of the arguments object, given to the model as is


_PATH: JsonObject = {
    "type": "string",
    "description": "Path relative to the repository root ('' = root).",
}
SPECS: tuple[ToolSpec, ...] = (
    ToolSpec(
        ToolName.LIST_FILES,
        "List files and directories in the read-only repository checkout.",
        {
            "type": "object",
            "properties": {
                "path": _PATH,
                "recursive": {"type": "boolean", "description": "Include subdirectories."},
            },
            "additionalProperties": False,
        },
    ),
    ToolSpec(
        ToolName.READ_FILE,
        f"Read up to {READ_MAX_LINES} lines of a text file in the repository, numbered.",
        {
            "type": "object",
            "properties": {
                "path": _PATH,
                "start_line": {"type": "integer", "minimum": 1},
                "max_lines": {"type": "integer", "minimum": 1, "maximum": READ_MAX_LINES},
            },
            "required": ["path"],
            "additionalProperties": False,
        },
    ),
    ToolSpec(
        ToolName.SEARCH_TEXT,
        f"Find lines containing a literal text (case-insensitive); at most "
        f"{SEARCH_MAX_MATCHES} matches as path:line: text.",
        {
            "type": "object",
            "properties": {"query": {"type": "string", "minLength": 1}, "path": _PATH},
            "required": ["query"],
            "additionalProperties": False,
        },
    ),
)


@dataclass(frozen=True)
class ToolCall:
    id: str
    name: str
    arguments: str  # the raw JSON text the model produced


@dataclass(frozen=True)
class ToolResult:
    call: ToolCall
    content: str  # what goes back to the model
    ok: bool


class ToolRefused(Exception):
    """A tool call that is not allowed or not possible; the message goes back to the model."""


def confine(root: Path, raw: object) -> Path:
    """`raw` resolved inside `root` (itself resolved), or ToolRefused saying why not."""
    if not isinstance(raw, str):
        raise ToolRefused("path must be a string")
    if len(raw) > MAX_PATH_CHARS or "\x00" in raw:
        raise ToolRefused("path is not a valid relative path")
    if (
        PurePosixPath(raw).is_absolute()
        or PureWindowsPath(raw).is_absolute()
        or PureWindowsPath(raw).drive
        or raw.startswith(("\\", "~"))
    ):
        raise ToolRefused("absolute paths are refused; use a path relative to the repository")
    parts = raw.replace("\\", "/").split("/")
    if ".." in parts:
        raise ToolRefused("'..' is refused: paths stay inside the repository checkout")
    if ".git" in parts:
        raise ToolRefused("the .git directory is not readable")
    resolved = (root / raw).resolve()
    if resolved != root and root not in resolved.parents:
        raise ToolRefused("that path leads outside the repository checkout (symlink)")
    return resolved


def untrusted(source: str, body: str, **attributes: str) -> str:
    """Tool output as data the model must not obey (the system prompt says so)."""
    attrs = "".join(f' {key}="{_attr(value)}"' for key, value in attributes.items())
    safe = body.replace("</untrusted-data", "&lt;/untrusted-data")
    return f'<untrusted-data source="{source}"{attrs}>\n{safe}\n</untrusted-data>'


class RepoTools:
    """The tools for one turn: a checkout, a per-turn output allowance, a round limit."""

    def __init__(self, checkout: Path, *, max_rounds: int, budget_chars: int) -> None:
        self.root = checkout.resolve()
        self.max_rounds = max_rounds
        self.budget_chars = budget_chars
        self.used_chars = 0

    @property
    def specs(self) -> tuple[ToolSpec, ...]:
        return SPECS

    async def run(self, calls: list[ToolCall], *, last_round: bool) -> list[ToolResult]:
        results = [await asyncio.to_thread(self.run_one, call) for call in calls]
        if last_round:
            note = "\n(That was the last tool round for this turn: answer now.)"
            results = [ToolResult(r.call, r.content + note, r.ok) for r in results]
        return results

    def run_one(self, call: ToolCall) -> ToolResult:
        try:
            arguments = _arguments(call.arguments)
            body, attributes = self._dispatch(call.name, arguments)
        except ToolRefused as exc:
            log.info("tool %s refused: %s", call.name, exc)
            return ToolResult(call, f"error: {exc}", ok=False)
        left = self.budget_chars - self.used_chars
        if left <= 0:
            return ToolResult(
                call, "error: the tool output allowance for this turn is used up", ok=False
            )
        if len(body) > min(left, CALL_OUTPUT_CHARS):
            body = body[: min(left, CALL_OUTPUT_CHARS)] + "\n[… output truncated]"
        self.used_chars += len(body)
        return ToolResult(call, untrusted(f"tool:{call.name}", body, **attributes), ok=True)

    def _dispatch(self, name: str, arguments: JsonObject) -> tuple[str, dict[str, str]]:
        if name == ToolName.LIST_FILES:
            _only(arguments, {"path", "recursive"})
            path = arguments.get("path", "")
            recursive = arguments.get("recursive", False)
            if not isinstance(recursive, bool):
                raise ToolRefused("recursive must be true or false")
            return self.list_files(path, recursive=recursive), {"path": _shown(path)}
        if name == ToolName.READ_FILE:
            _only(arguments, {"path", "start_line", "max_lines"})
            start = _int_arg(arguments, "start_line", 1, low=1, high=10**9)
            count = _int_arg(arguments, "max_lines", READ_DEFAULT_LINES, low=1, high=READ_MAX_LINES)
            path = arguments.get("path")
            return self.read_file(path, start_line=start, max_lines=count), {"path": _shown(path)}
        if name == ToolName.SEARCH_TEXT:
            _only(arguments, {"query", "path"})
            query = arguments.get("query")
            if not isinstance(query, str) or not query.strip() or len(query) > 200:
                raise ToolRefused("query must be a non-empty string of at most 200 characters")
            path = arguments.get("path", "")
            return self.search_text(query, path), {"query": _shown(query)}
        known = ", ".join(ToolName)
        raise ToolRefused(f"unknown tool {name!r}; the read-only tools are {known}")

    def list_files(self, raw: object, *, recursive: bool = False) -> str:
        target = confine(self.root, raw)
        if not target.is_dir():
            raise ToolRefused("not a directory in the repository")
        entries: list[str] = []
        for path in self._walk(target, recursive=recursive, dirs=True):
            if len(entries) >= LIST_MAX_ENTRIES:
                entries.append(f"[… stopped at {LIST_MAX_ENTRIES} entries; list a subdirectory]")
                break
            shown = path.relative_to(self.root).as_posix()
            entries.append(shown + "/" if path.is_dir() else shown)
        return "\n".join(entries) or "(empty directory)"

    def read_file(
        self, raw: object, *, start_line: int = 1, max_lines: int = READ_DEFAULT_LINES
    ) -> str:
        target = confine(self.root, raw)
        if not target.is_file():
            raise ToolRefused("not a file in the repository")
        # Small files are counted to the end so the model knows their length; big ones
        # are read only as far as the window.
        count_all = target.stat().st_size <= SEARCH_MAX_FILE_BYTES
        lines: list[str] = []
        total = 0
        more = False
        with target.open("rb") as handle:
            if b"\x00" in handle.read(SNIFF_BYTES):
                raise ToolRefused("binary file; only text files can be read")
            handle.seek(0)
            for number, raw_line in enumerate(handle, start=1):
                total = number
                if number < start_line:
                    continue
                if len(lines) >= max_lines:
                    if count_all:
                        continue
                    more = True
                    break
                text = raw_line.decode("utf-8", errors="replace").rstrip("\r\n")
                lines.append(f"{number:>6}  {_clip_line(text, 2000)}")
        if not lines:
            return f"(no lines from {start_line}; the file has {total} lines)"
        last = start_line + len(lines) - 1
        of = "; more follow" if more else f"of {total}"
        return "\n".join(lines) + f"\n[lines {start_line}-{last} {of}]"

    def search_text(self, query: str, raw: object = "") -> str:
        target = confine(self.root, raw)
        needle = query.casefold()
        matches: list[str] = []
        scanned = 0
        files = (
            iter([target]) if target.is_file() else self._walk(target, recursive=True, dirs=False)
        )
        for path in files:
            scanned += 1
            if scanned > SEARCH_MAX_FILES:
                break
            matches.extend(self._search_file(path, needle, SEARCH_MAX_MATCHES - len(matches)))
            if len(matches) >= SEARCH_MAX_MATCHES:
                break
        if len(matches) >= SEARCH_MAX_MATCHES or scanned > SEARCH_MAX_FILES:
            matches.append("[… search stopped at its limit; narrow the path or the query]")
        return "\n".join(matches) or "(no matches)"

    def _search_file(self, path: Path, needle: str, limit: int) -> list[str]:
        try:
            if path.stat().st_size > SEARCH_MAX_FILE_BYTES:
                return []
            data = path.read_bytes()
        except OSError:
            return []
        if b"\x00" in data[:SNIFF_BYTES]:
            return []
        shown = path.relative_to(self.root).as_posix()
        found: list[str] = []
        for number, line in enumerate(data.decode("utf-8", errors="replace").splitlines(), 1):
            if needle in line.casefold():
                found.append(f"{shown}:{number}: {_clip_line(line.strip(), LINE_CHARS)}")
                if len(found) >= limit:
                    break
        return found

    def _walk(self, top: Path, *, recursive: bool, dirs: bool) -> Iterator[Path]:
        """Entries under `top`, sorted, never into .git, never through a symlink out."""
        for current, dirnames, filenames in os.walk(top, followlinks=False):
            dirnames[:] = sorted(d for d in dirnames if d != ".git")
            here = Path(current)
            names = sorted([*dirnames, *filenames]) if dirs else sorted(filenames)
            for name in names:
                path = here / name
                if path.is_symlink() and not self._inside(path):
                    continue
                yield path
            if not recursive:
                return

    def _inside(self, path: Path) -> bool:
        resolved = path.resolve()
        return resolved == self.root or self.root in resolved.parents


def status_text(round_number: int, max_rounds: int, calls: list[ToolCall]) -> str:
    names = ", ".join(f"{call.name} {_summary(call)}".strip() for call in calls[:3])
    extra = f" (+{len(calls) - 3})" if len(calls) > 3 else ""
    return f"tool round {round_number}/{max_rounds} · {names}{extra}"


def _summary(call: ToolCall) -> str:
    try:
        arguments = _OBJECT.decode(call.arguments or "{}")
    except msgspec.DecodeError:  # not JSON or not an object: the tool will say so
        return ""
    value = arguments.get("path") or arguments.get("query") or ""
    return _clip_line(str(value), 60)


def _arguments(raw: str) -> JsonObject:
    """The arguments the model wrote: any JSON object (each tool checks its own)."""
    try:
        return _OBJECT.decode(raw or "{}")
    except msgspec.ValidationError:
        raise ToolRefused("arguments must be a JSON object") from None
    except msgspec.DecodeError:
        raise ToolRefused("arguments are not valid JSON") from None


def _only(arguments: JsonObject, allowed: set[str]) -> None:
    unknown = sorted(set(arguments) - allowed)
    if unknown:
        raise ToolRefused(f"unknown arguments {unknown}; allowed: {sorted(allowed)}")


def _int_arg(arguments: JsonObject, name: str, default: int, *, low: int, high: int) -> int:
    value = arguments.get(name, default)
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
        raise ToolRefused(f"{name} must be an integer from {low} to {high}")
    return value


def _clip_line(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _shown(value: object) -> str:
    return _clip_line(str(value), 200)


def _attr(value: str) -> str:
    return (
        value.replace("&", "&amp;").replace('"', "&quot;").replace("<", "&lt;").replace("\n", " ")
    )


CHARS_PER_ROOM_TOKEN = 3  # tool output allowance: the fitted history's free tokens x this


def tools_available(checkout: Path, rounds: int) -> bool:
    return rounds > 0 and checkout.is_dir()


def repo_tools(checkout: Path, *, rounds: int, room_tokens: int) -> RepoTools:
    """The read-only tools for a turn, their output bounded by the fitted history's room."""
    return RepoTools(checkout, max_rounds=rounds, budget_chars=room_tokens * CHARS_PER_ROOM_TOKEN)
