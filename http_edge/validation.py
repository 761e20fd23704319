"""Request parsing: bounded JSON bodies and typed fields, each error naming its field."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import orjson
from aiohttp import web

from bot.contracts.errors import ErrorDetail
from bot.errors import BadRequest, PayloadTooLarge, RequestTimeout
from bot.params import MAX_ISSUE, bounded_int

# No operator body needs more than a handful of levels; a deeper one is refused before any
# recursive code (ours, the database driver's JSON encoder) sees it.
MAX_DEPTH = 32
# A body that stops arriving for this long is a 408 (webhooks.routes has the same bound).
BODY_STALL_SECONDS = 30.0


async def read_json(request: web.Request, *, limit: int, required: bool = True) -> dict[str, Any]:
    """The body as a JSON object, refusing more than `limit` bytes before reading them."""
    if request.content_length is not None and request.content_length > limit:
        raise PayloadTooLarge(
            f"request body is larger than {limit} bytes", detail=ErrorDetail(limit=limit)
        )
    # read(n) returns what has arrived so far: keep reading to the end or past the limit.
    raw = b""
    while len(raw) <= limit:
        try:
            # A client whose body stops arriving would hold the request (and its handler's
            # slot) for as long as it keeps the connection: 408 instead, as webhooks get.
            async with asyncio.timeout(BODY_STALL_SECONDS):
                chunk = await request.content.read(limit + 1 - len(raw))
        except TimeoutError:
            raise RequestTimeout(
                f"the request body stopped arriving for {BODY_STALL_SECONDS:g} s"
            ) from None
        if not chunk:
            break
        raw += chunk
    if len(raw) > limit:
        raise PayloadTooLarge(
            f"request body is larger than {limit} bytes", detail=ErrorDetail(limit=limit)
        )
    if not raw.strip():
        if required:
            raise BadRequest("request body must be a JSON object")
        return {}
    data = parse_json(raw)
    if not isinstance(data, dict):
        raise BadRequest("request body must be a JSON object")
    return data


def parse_json(raw: bytes) -> Any:
    """Parse with a depth-checked parser: orjson stops at 1,024 levels with an error where
    the standard library would recurse until RecursionError; then our own limit and the
    storable-text check walk the value without recursion."""
    try:
        data = orjson.loads(raw)
    except orjson.JSONDecodeError as exc:
        reason = str(exc)
        if "depth limit" in reason or "recursion" in reason.lower():
            raise _too_deep() from None
        if "surrogate" not in reason:
            raise BadRequest(
                "request body is not valid JSON", detail=ErrorDetail(reason=reason)
            ) from None
        data = _parse_with_surrogates(raw)
    _check_tree(data)
    return data


def _parse_with_surrogates(raw: bytes) -> Any:
    """Valid JSON that escapes a lone surrogate: the standard parser reads it so the error
    can name the field; its recursion is bounded by the interpreter's guard."""
    try:
        return json.loads(raw)
    except RecursionError:
        raise _too_deep() from None
    except ValueError as exc:
        raise BadRequest(
            "request body is not valid JSON", detail=ErrorDetail(reason=str(exc))
        ) from None


def _too_deep() -> BadRequest:
    return BadRequest(
        f"request body is nested deeper than {MAX_DEPTH} levels",
        detail=ErrorDetail(limit=MAX_DEPTH),
    )


def _check_tree(data: Any) -> None:
    """Depth within MAX_DEPTH and every string storable, walked with an explicit stack."""
    stack: list[tuple[Any, str, int]] = [(data, "body", 0)]
    while stack:
        value, field, depth = stack.pop()
        if isinstance(value, str):
            storable_text(value, field)
        elif isinstance(value, list | dict):
            if depth >= MAX_DEPTH:
                raise _too_deep()
            if isinstance(value, dict):
                # The top-level object's keys name the field in errors; deeper keys do not.
                items = [(v, str(k) if depth == 0 else field) for k, v in value.items()]
                for key in value:
                    storable_text(str(key), field)
            else:
                items = [(v, field) for v in value]
            stack.extend((item, name, depth + 1) for item, name in items)


def storable_text(value: str, field: str) -> None:
    """Refuse text no database can keep: NUL, and lone surrogates (not UTF-8: a JSON escape,
    or header bytes aiohttp decoded with surrogateescape)."""
    if "\x00" in value:
        raise BadRequest(f"{field} contains a NUL character", detail=ErrorDetail(field=field))
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        raise BadRequest(
            f"{field} is not valid UTF-8 text", detail=ErrorDetail(field=field)
        ) from None


def reject_unknown(data: dict[str, Any], allowed: set[str]) -> None:
    unknown = sorted(set(data) - allowed)
    if unknown:
        raise BadRequest(
            f"unknown field {unknown[0]!r}",
            detail=ErrorDetail(field=unknown[0], allowed=sorted(allowed)),
        )


def optional_str(data: dict[str, Any], name: str, *, max_length: int = 200) -> str | None:
    value = data.get(name)
    if value is None:
        return None
    if not isinstance(value, str):
        raise BadRequest(f"{name} must be a string", detail=ErrorDetail(field=name))
    if len(value) > max_length:
        raise BadRequest(
            f"{name} is longer than {max_length} characters", detail=ErrorDetail(field=name)
        )
    return value


def issue_number(value: Any, name: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not 0 < value <= MAX_ISSUE:
        raise BadRequest(
            f"{name} must be a positive integer issue number", detail=ErrorDetail(field=name)
        )
    return value


def query_int(request: web.Request, name: str, *, default: int, maximum: int) -> int:
    return bounded_int(request.query.get(name), name, default=default, maximum=maximum)
