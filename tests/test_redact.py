"""Public text is checked as GitHub renders it: a character reference (`&#64;`, `&#x40;`,
`&commat;`) is the character it names there, so it can carry no mention, closing keyword,
link or secret past redaction and defanging."""

from __future__ import annotations

import base64
import html
import re

import pytest

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
