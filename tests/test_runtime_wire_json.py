"""Tagged frames at the model-provider seam: unknown tags skipped, known ones checked."""

from __future__ import annotations

import msgspec
import pytest

from bot.runtimes.anthropic_wire import EVENTS, ContentBlockStop, MessageParam, MessagesRequest
from bot.runtimes.wire_json import TaggedDecoder


class Circle(msgspec.Struct, frozen=True, tag_field="type", tag="circle"):
    radius: float


class Square(msgspec.Struct, frozen=True, tag_field="type", tag="square"):
    side: float


SHAPES: TaggedDecoder[Circle | Square] = TaggedDecoder(Circle | Square)


def test_a_known_tag_decodes_and_fields_added_later_are_ignored() -> None:
    assert SHAPES.decode('{"type": "square", "side": 2, "colour": "red"}') == Square(2)
    assert SHAPES.tags == {"circle", "square"}


def test_an_unknown_tag_is_skipped_whatever_its_shape() -> None:
    assert SHAPES.decode('{"type": "hexagon", "sides": "six"}') is None


@pytest.mark.parametrize(
    ("frame", "said"),
    [
        ('{"type": "circle"}', "Object missing required field `radius`"),
        ('{"type": "circle", "radius": "big"}', "Expected `float`, got `str` - at `$.radius`"),
        ('{"radius": 1}', "Object missing required field `type`"),
        ('{"type": 3}', "Expected `str`, got `int` - at `$.type`"),
        ("[1]", "Expected `object`, got `array`"),
    ],
)
def test_a_known_tag_in_the_wrong_shape_or_no_tag_is_an_error_naming_the_field(
    frame: str, said: str
) -> None:
    with pytest.raises(msgspec.ValidationError) as raised:
        SHAPES.decode(frame)
    assert said in str(raised.value)


def test_the_place_of_a_nested_frame_is_named() -> None:
    with pytest.raises(msgspec.ValidationError) as raised:
        SHAPES.decode('{"type": "circle"}', at="$.shape")
    assert str(raised.value) == "Object missing required field `radius` (in `$.shape`)"


def test_text_that_is_not_json_is_a_decode_error() -> None:
    with pytest.raises(msgspec.DecodeError):
        SHAPES.decode("{not json")


def test_an_anthropic_event_decodes_by_its_type() -> None:
    assert EVENTS.decode('{"type": "content_block_stop", "index": 2}') == ContentBlockStop(2)


def test_unset_request_fields_are_left_out_of_the_body() -> None:
    request = MessagesRequest(
        model="m", max_tokens=5, system="s", messages=[MessageParam("user", "hi")], stream=True
    )
    assert msgspec.json.decode(msgspec.json.encode(request)) == {
        "model": "m",
        "max_tokens": 5,
        "system": "s",
        "messages": [{"role": "user", "content": "hi"}],
        "stream": True,
    }
