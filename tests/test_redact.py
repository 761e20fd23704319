"""Public text is checked as GitHub renders it: a character reference (`&#64;`, `&#x40;`,
`&commat;`) is the character it names there, so it can carry no mention, closing keyword,
link or secret past redaction and defanging."""

from __future__ import annotations

import base64
import html
import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from bot.lifecycle.public_text import PublicPlace, defang, normalize
from bot.lifecycle.redact import MASK, Redactor

PLACE = PublicPlace(repo="owner/repo", issue=5, host="github.com")
SECRET = "sk-fake-model-key-0123456789abcdef"
MENTION = re.compile(r"@[A-Za-z0-9]")
CLOSES = re.compile(r"\b(?:close[sd]?|fix(?:e[sd])?|resolve[sd]?)\b[\s:]*#(\d+)", re.I)


def _published(text: str) -> str:
    """What `Run.public_block` makes of a runtime's words."""
    return defang(Redactor([SECRET]).public_block(normalize(text)), PLACE)


@pytest.mark.parametrize(
    "text",
    [
        "thanks &#64;maintainer, &#x40;other, &commat;third and &amp;#64;fourth",
        "the key is sk-&#102;ake-model-key-0123456789abcdef",
        "the key is sk-fake-model-key-0123456789abcde&#x66;",
        "the key is sk-&#x200b;fake-model-key-0123456789abcdef",  # invisible once rendered
        "&#70;ixes &#35;2 and closes &num;3",
        "&lt;!-- steelframe-decision --&gt; and &#60;img src=x&#62;",
        "see &#104;ttps://evil.example/x",
    ],
)
def test_character_references_are_checked_as_github_renders_them(text: str) -> None:
    shown = html.unescape(_published(text))  # GitHub decodes them (CommonMark 6.2)
    assert SECRET not in shown and SECRET not in normalize(shown), shown
    assert not MENTION.search(shown), shown
    assert [m.group(1) for m in CLOSES.finditer(shown)] == [], shown
    assert "<!--" not in shown and "<img" not in shown, shown
    assert "https://evil" not in shown, shown


def test_plain_text_and_ampersands_stay_as_they_were() -> None:
    text = "R&D: a && b; AT&T; x &lt y"
    assert Redactor([SECRET]).public_text(text) == text
    assert Redactor([SECRET]).public_text(f"key {SECRET}") == f"key {MASK}"


def _encodings(value: str) -> list[str]:
    """How an agent may write a key down by accident: base64 (a Kubernetes Secret, a Basic
    header, inside a longer blob at any byte offset; standard and URL-safe), hex."""
    raw = value.encode()
    blobs = [prefix + raw + b"\n" for prefix in (b"", b"u:", b"user:")]
    found = [base64.b64encode(blob).decode() for blob in blobs]
    found += [base64.urlsafe_b64encode(blob).decode() for blob in blobs]
    return [*found, raw.hex(), raw.hex().upper()]


@pytest.mark.parametrize("encoded", _encodings(SECRET))
def test_a_known_value_is_recognised_in_base64_and_hex(encoded: str) -> None:
    redactor = Redactor([SECRET])
    text = f"data:\n  OPENAI_API_KEY: {encoded}\n"
    assert redactor.contains_secret(text)
    assert encoded not in redactor.redact(text) and MASK in redactor.redact(text)
    assert redactor.longest_value >= len(encoded) - 4  # pieces searched overlap this much


def test_encoded_forms_of_a_short_value_are_not_guessed_at() -> None:
    redactor = Redactor(["pw123456"])  # 8 characters: its base64 core would be 9
    assert not redactor.contains_secret(base64.b64encode(b"pw123456").decode()[1:])


# The masking the Redactor promises, written the plain way: one alternation of the values,
# longest first, so each match starts as far left as it can and is the longest one there.
def _masked_by_alternation(values: set[str], text: str) -> str:
    ordered = sorted(values, key=len, reverse=True)
    return re.sub("|".join(re.escape(v) for v in ordered), MASK, text)


@given(
    values=st.sets(st.text(alphabet="ab", min_size=8, max_size=11), min_size=1, max_size=6),
    pieces=st.lists(st.text(alphabet="ab ", max_size=12), max_size=6),
    data=st.data(),
)
@settings(max_examples=400, deadline=None)
def test_masking_takes_the_leftmost_then_longest_value_like_an_alternation(
    values: set[str], pieces: list[str], data: st.DataObject
) -> None:
    # Values that overlap and contain one another (two letters), set in noise.
    planted = [data.draw(st.sampled_from(sorted(values))) for _ in pieces]
    text = "".join(piece + value for piece, value in zip(pieces, planted, strict=True))
    redactor = Redactor(values)
    # Values under MIN_ENCODED have no encoded forms: the values are all it searches for.
    assert redactor.redact(text) == _masked_by_alternation(values, text)
    assert redactor.contains_secret(text) == any(v in text for v in values)


def test_a_token_added_later_is_masked_with_the_values_from_before() -> None:
    redactor = Redactor([SECRET])
    token = "ghs_0123456789abcdefABCDEF0123456789abcd"
    assert redactor.redact(f"{token} {SECRET}") == f"{token} {MASK}"
    redactor.add(token)
    assert redactor.redact(f"{token} {SECRET}") == f"{MASK} {MASK}"
    forms = base64.b64encode(token.encode()).decode()
    assert MASK in redactor.redact(forms)  # its encoded forms too


def test_values_and_text_beyond_the_basic_plane_are_masked_at_the_right_place() -> None:
    redactor = Redactor(["secret-\U0001f642-value-1234"])
    text = "\U0001f642\U0001d4b3 secret-\U0001f642-value-1234 \U0001f642 end"
    assert redactor.redact(text) == f"\U0001f642\U0001d4b3 {MASK} \U0001f642 end"
