"""The STEELFRAME_META trailer: parsing and the streaming filter."""

from __future__ import annotations

import pytest

from bot.dialogue.trailer import Intent, TrailerFilter, parse_trailer, split_reply


def _stream(pieces: list[str]) -> str:
    filt = TrailerFilter()
    shown = "".join(filt.feed(p) for p in pieces) + filt.flush()
    return shown


@pytest.mark.parametrize("size", [1, 2, 3, 7, 15, 100])
def test_filter_hides_the_trailer_at_any_split(size: int) -> None:
    text = 'The answer is STEEL beams.\nSTEELFRAME_META: {"intent": "answer"}'
    pieces = [text[i : i + size] for i in range(0, len(text), size)]
    assert _stream(pieces) == "The answer is STEEL beams.\n"


def test_filter_releases_a_held_prefix_that_was_not_the_marker() -> None:
    assert _stream(["ends with STEELFRA"]) == "ends with STEELFRA"


def test_split_reply_parses_fields() -> None:
    reply, trailer = split_reply(
        'Filed.\nSTEELFRAME_META: {"intent": "file_work", "title": "Fix login", "body": "b"}'
    )
    assert reply == "Filed."
    assert trailer.intent is Intent.FILE_WORK and trailer.title == "Fix login"


@pytest.mark.parametrize(
    "raw", ["", "{", "[1]", '{"intent": "destroy"}', '"answer"', '{"intent": 3}']
)
def test_malformed_trailers_are_answer(raw: str) -> None:
    trailer = parse_trailer(raw)
    assert trailer.intent is Intent.ANSWER and trailer.malformed


def test_no_trailer_is_answer() -> None:
    reply, trailer = split_reply("just text")
    assert reply == "just text" and trailer.intent is Intent.ANSWER and not trailer.malformed
