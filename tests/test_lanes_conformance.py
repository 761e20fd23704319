"""Request smuggling and HTTP/1.1 conformance at the webhook fast lane (steelframe.lanes),
against the real app over real sockets: what a client sees when a request's framing is
ambiguous or malformed, pipelined, oversized, slow, or split into many writes.

Every ambiguous request carries a second, complete, signed delivery where a parser that
read its framing the other way would find a request: the client must see one refusal, the
connection closed, and no delivery stored (nothing smuggled through)."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from steelframe import lanes
from tests.conftest import webhook_headers as signed_headers
from tests.test_lanes import (
    OPENED,
    PATH,
    Served,
    closed_by_server,
    connection,
    exchange,
    read_answer,
    request_bytes,
    serve,
)


@pytest.fixture
async def served(api_factory: Callable[..., Any], tmp_path: Path) -> Served:
    return await serve(api_factory, tmp_path)


def smuggled() -> bytes:
    """A whole delivery: stored only if some parser took it for a request of its own."""
    return request_bytes(delivery="smuggled")


def delivery_head(body: bytes = OPENED, **headers: str) -> str:
    """A signed delivery's head lines (no request line, no Content-Length) as text."""
    sent = {"Host": "steelframe.test", **signed_headers(body, "issues", delivery="framed")}
    sent.update(headers)
    return "".join(f"{name}: {value}\r\n" for name, value in sent.items())


def framed(framing: str, body: bytes) -> bytes:
    """A delivery whose framing lines are `framing` (raw), then `body` as sent."""
    return f"POST {PATH} HTTP/1.1\r\n{delivery_head()}{framing}\r\n".encode() + body


async def refused_alone(served: Served, raw: bytes, case: str) -> None:
    """`raw` draws one 400 from aiohttp (not the lane), then the connection closes with
    nothing more said, and no delivery is stored."""
    handed_off = served.lanes.handed_off
    async with connection(served.port) as (reader, writer):
        writer.write(raw)
        answer = await read_answer(reader)
        assert (answer.status, answer.json()["code"]) == (400, "bad_request"), case
        assert await closed_by_server(reader), case  # and no second answer before the close
    assert served.stored() == 0, case
    assert served.lanes.answered == 0 and served.lanes.handed_off == handed_off + 1, case


CHUNKED_EMPTY = b"0\r\n\r\n"  # a chunked body with no data
CHUNKED = "Transfer-Encoding: chunked\r\n"
LENGTH = f"Content-Length: {len(OPENED)}\r\n"  # OPENED's
EMPTY_LENGTH = f"Content-Length: {len(CHUNKED_EMPTY)}\r\n"  # CHUNKED_EMPTY's

# Framing lines (raw) and the body sent after them, by case.
FRAMINGS: dict[str, tuple[str, bytes]] = {
    # Content-Length and Transfer-Encoding together: RFC 9112 6.3 allows a server to
    # reject; a front end and a back end reading different ones is the classic smuggle.
    "CL then TE": (EMPTY_LENGTH + CHUNKED, CHUNKED_EMPTY),
    "TE then CL": (CHUNKED + EMPTY_LENGTH, CHUNKED_EMPTY),
    "two lengths": ("Content-Length: 5\r\n" + LENGTH, OPENED),
    "equal lengths twice": (LENGTH * 2, OPENED),
    "signed length": (LENGTH.replace(": ", ": +"), OPENED),
    "negative length": ("Content-Length: -1\r\n", OPENED),
    "space inside the length": (LENGTH.replace("\r\n", " 0\r\n"), OPENED),
    "space before the colon": (LENGTH.replace(":", " :"), OPENED),
    "hex length": (f"Content-Length: 0x{len(OPENED):x}\r\n", OPENED),
    "xchunked with a length": ("Transfer-Encoding: xchunked\r\n" + LENGTH, OPENED),
    "xchunked alone": ("Transfer-Encoding: xchunked\r\n", OPENED),
    "tab before chunked, with a length": (CHUNKED.replace(" ", "\t") + EMPTY_LENGTH, CHUNKED_EMPTY),
    "space before the TE colon": (CHUNKED.replace(":", " :") + EMPTY_LENGTH, CHUNKED_EMPTY),
    "chunked not last": ("Transfer-Encoding: chunked, identity\r\n" + LENGTH, OPENED),
    "folded TE": (EMPTY_LENGTH + "X-Note: a\r\n " + CHUNKED, CHUNKED_EMPTY),
}


async def test_conflicting_or_malformed_framing_is_refused_and_smuggles_nothing(
    served: Served,
) -> None:
    # One server for every case (each on its own connection): a server's start is most of
    # a case's time.
    for case, (framing, body) in FRAMINGS.items():
        await refused_alone(served, framed(framing, body) + smuggled(), case)


def _head_of(raw: bytes) -> bytes:
    return raw[: raw.index(b"\r\n\r\n") + 4]


def _body_of(raw: bytes) -> bytes:
    return raw[raw.index(b"\r\n\r\n") + 4 :]


# A delivery damaged, by case.
DAMAGES: dict[str, Callable[[bytes], bytes]] = {
    "obs-fold": lambda raw: raw.replace(b"\r\nHost: ", b"\r\nX-Folded: a\r\n b\r\nHost: ", 1),
    "bare LF everywhere": lambda raw: _head_of(raw).replace(b"\r\n", b"\n") + _body_of(raw),
    "one bare LF": lambda raw: raw.replace(b"\r\nHost: ", b"\nHost: ", 1),
    "bare CR": lambda raw: raw.replace(b"\r\nHost: ", b"\rHost: ", 1),
    "NUL in a value": lambda raw: raw.replace(b"Host: steelframe", b"Host: steel\x00frame", 1),
    "control byte in a value": lambda raw: raw.replace(
        b"Host: steelframe", b"Host: steel\x01frame", 1
    ),
    "NUL in a name": lambda raw: raw.replace(b"Host: ", b"Ho\x00st: ", 1),
    "space before the first header": lambda raw: raw.replace(b"\r\nHost: ", b"\r\n Host: ", 1),
}


async def test_a_malformed_head_is_refused_and_smuggles_nothing(served: Served) -> None:
    for case, damage in DAMAGES.items():
        await refused_alone(served, damage(request_bytes(delivery="malformed")) + smuggled(), case)


async def test_the_length_may_have_spaces_around_it(served: Served) -> None:
    # Optional whitespace around a field value is the value (RFC 9110 5.5): served.
    raw = framed(f"Content-Length:  {len(OPENED)} \t\r\n", OPENED)
    (answer,) = await exchange(served.port, raw)
    assert (answer.status, answer.json()["delivery"]) == (202, "framed")
    assert served.lanes.answered == 1 and served.stored() == 1


async def test_two_and_three_pipelined_deliveries_are_answered_in_order(served: Served) -> None:
    answers = await exchange(served.port, *(request_bytes(delivery=f"p-{n}") for n in range(2)))
    assert [(a.status, a.json()["delivery"]) for a in answers] == [(202, "p-0"), (202, "p-1")]
    answers = await exchange(served.port, *(request_bytes(delivery=f"q-{n}") for n in range(3)))
    assert [a.json()["delivery"] for a in answers] == ["q-0", "q-1", "q-2"]
    assert served.lanes.answered == 5 and served.lanes.handed_off == 0
    assert served.stored() == 5


async def test_a_lane_request_then_another_in_one_write_are_both_answered_in_order(
    served: Served,
) -> None:
    delivered, chunked, health = await exchange(
        served.port,
        request_bytes(delivery="first"),
        request_bytes(delivery="second", chunked=True),
        b"GET /healthz HTTP/1.1\r\nHost: steelframe.test\r\n\r\n",
    )
    assert (delivered.status, delivered.json()["delivery"]) == (202, "first")
    # The second and third by aiohttp, which the connection was handed to at the second.
    assert (chunked.status, chunked.json()["delivery"]) == (202, "second")
    assert health.status == 200 and health.json()["status"] == "ok"
    assert served.lanes.answered == 1 and served.lanes.handed_off == 1
    assert served.stored() == 2


async def test_a_smuggle_after_a_lane_request_is_refused_after_its_answer(served: Served) -> None:
    framing = f"Content-Length: {len(CHUNKED_EMPTY)}\r\nTransfer-Encoding: chunked\r\n"
    async with connection(served.port) as (reader, writer):
        writer.write(request_bytes(delivery="honest") + framed(framing, CHUNKED_EMPTY) + smuggled())
        honest = await read_answer(reader)
        refused = await read_answer(reader)
        assert await closed_by_server(reader)
    assert (honest.status, honest.json()["delivery"]) == (202, "honest")
    assert refused.status == 400
    assert served.stored() == 1


async def test_nothing_after_connection_close_is_read(served: Served) -> None:
    async with connection(served.port) as (reader, writer):
        writer.write(request_bytes(delivery="last", headers={"Connection": "close"}) + smuggled())
        answer = await read_answer(reader)
        assert answer.status == 202 and answer.headers["connection"] == "close"
        assert await closed_by_server(reader)
    assert served.stored() == 1


async def test_a_head_over_the_limit_is_a_431_and_smuggles_nothing(served: Served) -> None:
    padded = request_bytes(delivery="large", headers={"X-Padding": "p" * (lanes.MAX_HEAD + 10)})
    async with connection(served.port) as (reader, writer):
        writer.write(padded + smuggled())
        answer = await read_answer(reader)
        assert answer.status == 431 and answer.json()["code"] == "headers_too_large"
        assert await closed_by_server(reader)
    assert served.stored() == 0 and served.lanes.answered == 0


async def test_a_body_over_the_limit_is_a_413_before_it_is_read(served: Served) -> None:
    declared = request_bytes(delivery="huge", headers={"Content-Length": str(26 * 1024 * 1024)})
    async with connection(served.port) as (reader, writer):
        # What follows the head is the (declared) body: dropped, never a request.
        writer.write(_head_of(declared) + smuggled())
        answer = await read_answer(reader)
        assert answer.status == 413 and answer.headers["connection"] == "close"
        assert await closed_by_server(reader)
    assert served.stored() == 0 and served.lanes.answered == 1


async def trickle(
    reader: asyncio.StreamReader, writer: asyncio.StreamWriter, data: bytes, *, every: float
) -> tuple[int, bytes | None]:
    """Send `data` a byte at a time, waiting up to `every` seconds after each byte but the
    last for the server to speak or close; returns how many bytes were sent and the first
    byte the server said in between (b"" if it closed, None if it said nothing)."""
    for sent in range(1, len(data) + 1):
        writer.write(data[sent - 1 : sent])
        if sent < len(data):
            with contextlib.suppress(TimeoutError):
                return sent, await asyncio.wait_for(reader.read(1), every)
    return len(data), None


async def test_a_head_sent_too_slowly_is_closed(
    served: Served, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(lanes, "KEEP_ALIVE_SECONDS", 0.3)
    raw = request_bytes(delivery="slow-head")
    async with connection(served.port) as (reader, writer):
        sent, said = await trickle(reader, writer, _head_of(raw), every=0.05)
    assert said == b"" and sent < len(_head_of(raw))  # closed mid-head, nothing answered
    assert served.stored() == 0 and served.lanes.answered == 0


async def test_a_body_that_stalls_is_a_408_and_one_that_keeps_coming_is_served(
    served: Served, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(lanes, "BODY_IDLE_SECONDS", 0.3)
    raw = request_bytes(delivery="stalls")
    async with connection(served.port) as (reader, writer):
        writer.write(raw[: len(raw) - 100])
        stalled = await read_answer(reader)
        assert stalled.status == 408 and stalled.headers["connection"] == "close"
        assert await closed_by_server(reader)
    monkeypatch.setattr(lanes, "BODY_IDLE_SECONDS", 5.0)
    raw = request_bytes(delivery="trickles")
    body_at = len(_head_of(raw))
    async with connection(served.port) as (reader, writer):
        writer.write(raw[: len(raw) - 20])
        sent, said = await trickle(reader, writer, raw[len(raw) - 20 :], every=0.02)
        assert (sent, said) == (20, None)  # nothing said until the body was whole
        answer = await read_answer(reader)
    assert body_at < len(raw) - 20
    assert (answer.status, answer.json()["delivery"]) == (202, "trickles")
    assert served.stored() == 1


async def test_http_1_0_is_served_by_aiohttp_and_closed(served: Served) -> None:
    raw = request_bytes(delivery="old", method_line=f"POST {PATH} HTTP/1.0")
    async with connection(served.port) as (reader, writer):
        writer.write(raw)
        answer = await read_answer(reader)
        assert (answer.status, answer.json()["delivery"]) == (202, "old")
        assert await closed_by_server(reader)  # HTTP/1.0 without keep-alive
    assert served.lanes.answered == 0 and served.lanes.handed_off == 1


async def test_expect_100_continue_is_answered_before_the_body_is_sent(served: Served) -> None:
    raw = request_bytes(delivery="expecting", headers={"Expect": "100-continue"})
    async with connection(served.port) as (reader, writer):
        writer.write(_head_of(raw))
        interim = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), 30)
        assert interim.startswith(b"HTTP/1.1 100 Continue")
        writer.write(_body_of(raw))
        answer = await read_answer(reader)
    assert (answer.status, answer.json()["delivery"]) == (202, "expecting")
    assert served.lanes.answered == 0 and served.lanes.handed_off == 1


async def test_an_absolute_form_target_is_aiohttps(served: Served) -> None:
    raw = request_bytes(
        delivery="absolute", method_line=f"POST http://steelframe.test{PATH} HTTP/1.1"
    )
    (answer,) = await exchange(served.port, raw)
    assert answer.status == 202 and answer.json()["delivery"] == "absolute"
    assert served.lanes.answered == 0 and served.lanes.handed_off == 1


async def write_in_pieces(writer: asyncio.StreamWriter, data: bytes, size: int) -> None:
    """Each piece sent on its own (the server reads it before the next is written: the
    test and the server share one event loop, which runs the server's read in between)."""
    for at in range(0, len(data), size):
        writer.write(data[at : at + size])
        await writer.drain()
        await asyncio.sleep(0)


async def test_deliveries_in_many_small_writes_are_served_on_the_lane(served: Served) -> None:
    for size in (1, 7, 100):  # the heads in pieces this size, blank lines split too
        first, second = (request_bytes(delivery=f"pieces-{size}-{n}") for n in (1, 2))
        async with connection(served.port) as (reader, writer):
            for raw in (first, second):
                await write_in_pieces(writer, _head_of(raw), size)
                await write_in_pieces(writer, _body_of(raw), max(size, 1000))
            answers = [await read_answer(reader), await read_answer(reader)]
        assert [(a.status, a.json()["delivery"]) for a in answers] == [
            (202, f"pieces-{size}-1"),
            (202, f"pieces-{size}-2"),
        ]
    assert served.lanes.answered == 6 and served.lanes.handed_off == 0


async def test_a_chunked_delivery_in_small_writes_is_handed_over_whole(served: Served) -> None:
    # The lane has read part of the head before it sees Transfer-Encoding: aiohttp gets the
    # request from its first byte all the same.
    raw = request_bytes(delivery="chunked-pieces", chunked=True)
    async with connection(served.port) as (reader, writer):
        await write_in_pieces(writer, raw, 5)
        answer = await read_answer(reader)
    assert (answer.status, answer.json()["delivery"]) == (202, "chunked-pieces")
    assert served.lanes.answered == 0 and served.lanes.handed_off == 1


async def test_empty_lines_before_a_delivery_are_skipped(served: Served) -> None:
    # RFC 9112 2.2: a server SHOULD ignore at least one empty line before a request line.
    (answer,) = await exchange(served.port, b"\r\n" + request_bytes(delivery="after-crlf"))
    assert (answer.status, answer.json()["delivery"]) == (202, "after-crlf")
    assert served.lanes.answered == 1
