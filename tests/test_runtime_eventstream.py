"""The SSE line parser and the inline <think> splitter, on the awkward inputs servers send."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from bot.runtimes.eventstream import EventStreamParser, ServerEvent, server_events
from bot.runtimes.thinktags import ThinkTagSplitter


def parse(lines: list[str]) -> list[ServerEvent]:
    parser = EventStreamParser()
    events = [event for line in lines if (event := parser.feed(line)) is not None]
    tail = parser.close()
    return [*events, tail] if tail else events


def test_event_and_data_pairs_comments_crlf_and_multiline_data() -> None:
    lines = [
        ": keep-alive\n",
        "event: message_start\r\n",
        'data: {"type": "message_start"}\r\n',
        "\r\n",
        "data:no-space\n",
        "data: second line\n",
        "id: 7\n",
        "retry: 1000\n",
        "\n",
        "event: ping\n",
        "\n",  # an event with no data is dropped
        "data: [DONE]\n",  # no closing blank line before the body ends
    ]
    assert parse(lines) == [
        ServerEvent("message_start", '{"type": "message_start"}'),
        ServerEvent("message", "no-space\nsecond line"),
        ServerEvent("message", "[DONE]"),
    ]


async def test_server_events_reads_byte_lines_including_broken_utf8() -> None:
    async def body() -> AsyncIterator[bytes]:
        for line in (b"data: caf\xc3\xa9\n", b"\n", b"data: \xff\n", b"\n"):
            yield line

    events = [event async for event in server_events(body())]
    assert [e.data for e in events] == ["café", "\ufffd"]


@pytest.mark.parametrize(
    ("chunks", "thinking", "reply"),
    [
        (["<think>a</think>b"], "a", "b"),
        (["<", "t", "h", "i", "n", "k", ">", "x", "<", "/think>", "\n\ny"], "x", "y"),
        (["no tags at all"], "", "no tags at all"),
        (["a < b and <thin"], "", "a < b and <thin"),  # flushed at the end: not a tag after all
        (["<think>never closed"], "never closed", ""),
        (["pre <think>mid</think> post"], "mid", "pre post"),
    ],
)
def test_think_tags_split_however_the_chunks_fall(
    chunks: list[str], thinking: str, reply: str
) -> None:
    splitter = ThinkTagSplitter()
    pieces = [piece for chunk in chunks for piece in splitter.feed(chunk)] + splitter.flush()
    assert "".join(text for is_thinking, text in pieces if is_thinking) == thinking
    assert "".join(text for is_thinking, text in pieces if not is_thinking) == reply
