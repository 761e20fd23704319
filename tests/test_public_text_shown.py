"""Public text is checked as a reader sees it on GitHub: markdown the renderer hides (a
backslash escape, an HTML comment or tag, emphasis, a code span's backticks, an invisible
character) can split no secret, mention, closing keyword or link past the checks.

The reader here is a whole markdown renderer (markdown-it, CommonMark with raw HTML, as
GitHub's is), its HTML read as a browser shows it: the text, each link's address."""

from __future__ import annotations

import re
import unicodedata
from html.parser import HTMLParser

import pytest
from markdown_it import MarkdownIt

from bot.lifecycle.public_text import PublicPlace, defang, normalize
from bot.lifecycle.redact import Redactor
from bot.lifecycle.states import TaskState
from tests.fakes.coding import command
from tests.fakes.lifecycle import Make
from tests.fakes.lifecycle import make_fixture as make_fixture  # the `make` fixture

PLACE = PublicPlace(repo="owner/repo", issue=5, host="github.com")
KNOWN = "sk-fake-model-key-0123456789abcdef"  # a value the worker knows
FOUND = "ghp_abcdefghijklmnopqrstuvwxyz0123456789"  # one it never knew: token-shaped
RENDERER = MarkdownIt("commonmark", {"html": True}).enable(["strikethrough", "table"])
CLOSES = re.compile(r"\b(?:close[sd]?|fix(?:e[sd])?|resolve[sd]?)\b[\s:]*#(\d+)", re.I)
MENTION = re.compile(r"(?<![\w.])@[A-Za-z0-9]")


class _Page(HTMLParser):
    """What a browser shows of the rendered HTML, and where its links and images lead."""

    def __init__(self, html: str) -> None:
        super().__init__(convert_charrefs=True)
        self.shown: list[str] = []
        self.addresses: list[str] = []
        self.feed(html)
        self.close()

    def handle_data(self, data: str) -> None:
        self.shown.append(data)

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.addresses += [value or "" for name, value in attrs if name in ("href", "src")]


def _read(published: str) -> tuple[str, list[str]]:
    """The text a reader sees (what they would copy, invisible characters left out) and the
    page's link and image addresses."""
    page = _Page(RENDERER.render(published))
    text = "".join(page.shown)
    visible = "".join(c for c in text if unicodedata.category(c) != "Cf")
    return visible, page.addresses


def _published(text: str) -> str:
    """What `Run.public_block` makes of a runtime's words."""
    return defang(Redactor([KNOWN]).public_block(normalize(text)), PLACE)


def _splits(secret: str) -> list[str]:
    """`secret` cut after its fourth character and joined by what GitHub shows as nothing."""
    head, tail = secret[:4], secret[4:]
    joins = ["<!-- -->", "<!---->", "<b></b>", "<span title=x></span>"]
    joins += [f"&#x{ord(c):x};" for c in "\u200b\u200c\u200d\u2060\ufeff\u00ad"]
    joins += list("\u200b\u200c\u200d\u2060\ufeff\u00ad")
    cut = [f"{head}{join}{tail}" for join in joins]
    # escaped punctuation: every `-`/`_` in it
    cut.append(secret.replace("-", "\\-").replace("_", "\\_"))
    # emphasis and code around the tail (the `-`/`_` before it keeps them flanking)
    dash = secret.index("-" if "-" in secret else "_") + 1
    before, after = secret[:dash], secret[dash:]
    cut += [f"{before}**{after}**", f"{before}*{after}*", f"{before}~~{after}~~"]
    cut += [f"{before}`{after}`", f"`{before}`{after}", f"{before}<em>{after}</em>"]
    cut.append(f"[{before}](https://github.com/owner/repo){after}")
    return cut


CASES = [(secret, cut) for secret in (KNOWN, FOUND) for cut in _splits(secret)]


@pytest.mark.parametrize(("secret", "text"), CASES)
def test_a_secret_split_by_markdown_is_masked_as_a_reader_sees_it(secret: str, text: str) -> None:
    assert secret in _read(text)[0]  # the reader would see it whole
    for published in (
        _published(f"Done: the key is {text}, see the log."),
        _published(f"Done.\n\n- the key:\n- {text}\n"),
        defang(Redactor([KNOWN]).public_text(normalize(f"key {text} here")), PLACE),
    ):
        shown, addresses = _read(published)
        assert secret not in shown, published
        assert secret[4:12] not in shown, published  # nor a piece of it
        assert not [a for a in addresses if secret in a.replace("%5C", "")], published
        assert "[REDACTED]" in shown, published


def test_a_secret_in_a_link_address_or_title_split_by_an_escape_is_masked() -> None:
    for secret in (KNOWN, FOUND):
        escaped = secret.replace("-", "\\-").replace("_", "\\_")
        text = f"[the log](https://ci.example/run?key={escaped})"
        assert _read(text)[1] == [f"https://ci.example/run?key={secret}"]
        shown, addresses = _read(_published(text))
        assert secret not in shown and not [a for a in addresses if secret in a]
        titled = _published(f'[the log](/log "{escaped}") and ![a chart](/c.png "{escaped}")')
        assert f'title="{secret}"' in RENDERER.render(f'[x](/y "{escaped}")')
        assert secret not in RENDERER.render(titled), titled


@pytest.mark.parametrize(
    "text",
    [
        "@**maintainer**, @*other* and @<!-- -->third",
        "thanks @`maintainer` and @<b>other</b>",
        "Fix<!-- -->es #2 and Fix**es** #3 and Clo<b></b>ses #4",
        "Fixes \\#2 and closes #\\3 and re\u200bsolves #4",
        "*Fixes* #2, fixe`s` #3",
        "Fixes #2- and closes #3&#x2d;, resolves #4-",  # a hyphen ends the number too
        "see [x](https\\://evil.example/p), ![i](https\\://evil.example/i.png)",
        "bare https\\://evil.example/q and www\\.evil.com and <https\\://evil.example/a>",
    ],
)
def test_mentions_closing_keywords_and_links_hidden_by_markdown_are_defanged(text: str) -> None:
    published = _published(text)
    shown, addresses = _read(published)
    raw = "".join(_Page(RENDERER.render(published)).shown)  # invisible characters kept
    assert not MENTION.search(raw), published
    assert [m.group(1) for m in CLOSES.finditer(shown)] == [], published
    assert not [a for a in addresses if "evil" in a], published
    # A bare address shown in prose must not be one GitHub links (`https://`, `www.`).
    assert not re.search(r"https?://evil|www\.evil", raw), published


def test_ordinary_markdown_is_published_as_written() -> None:
    summary = (
        "## Summary\n\nFixes #5. Changed `parse()` in **src/app.py** to handle *empty* "
        "input; see [the docs](docs/usage.md) and https://github.com/owner/repo/pull/7.\n\n"
        "- a_b_c, 2*3*4 = 24, C:\\path\\to, `a | b`\n\n"
        "| col | val |\n|-----|-----|\n| x | 1 |\n\n"
        '```python\n@pytest.fixture\ndef f(): return "https://example.org/x"\n```\n'
    )
    published = _published(summary)
    assert published == summary.replace("@pytest", "@\u200bpytest").rstrip("\n")


async def test_a_delivered_pull_request_shows_no_secret_split_by_markdown(make: Make) -> None:
    summary = (
        f"Done. Pushed with {FOUND[:3]}\\{FOUND[3:]}, the model key is "
        f"{KNOWN[:8]}**{KNOWN[8:]}**, cc @**maintainer**; Fix<!-- -->es #101."
    )
    assert FOUND in _read(summary)[0] and KNOWN in _read(summary)[0]
    lc = await make(coding_command=command("say", summary))
    issue = await lc.open_issue()
    await lc.work()
    assert lc.task(issue).state == TaskState.DELIVERED
    [pull] = await lc.pulls()
    published = [pull["body"], *(c["body"] for c in await lc.comments(issue))]
    for body in published:
        shown, _ = _read(body)
        assert FOUND not in shown and KNOWN[:12] not in shown, body
        assert not MENTION.search("".join(_Page(RENDERER.render(body)).shown)), body
        assert "101" not in [m.group(1) for m in CLOSES.finditer(shown)], body
    assert "Pushed with [REDACTED]" in _read(pull["body"])[0]


def test_an_address_urlsplit_cannot_read_is_unlinked_not_a_failure() -> None:
    for text in ("see https://[evil.example/x", "[x](https://[::1/y) and www.[evil", "https://a]b"):
        published = _published(text)  # raised ValueError: the run's words failed to publish
        assert not re.search(
            r"https?://\S|www\.\S", "".join(_Page(RENDERER.render(published)).shown)
        )


TOKENS = (
    FOUND,
    "github_pat_11ABCDEFG0123456789_abcdefghijklmnopqrstuvwxyz",
    "sk-proj-abcdefghijklmnopqrstuvwxyzABCDEF0123456789",
    "AKIAIOSFODNN7EXAMPLE",
    "xoxb-1234567890-abcdefghij",
)


@pytest.mark.parametrize("token", TOKENS)
def test_a_token_beside_an_underscore_is_still_masked(token: str) -> None:
    """`_` is a word character: a `\\b` around the shape let `key_ghp_...` and `ghp_..._`
    (and `ghp_...__`, which shows as the token followed by two underscores) through."""
    for text in (f"key_{token} ok", f"{token}_ ok", f"{token}__ ok", f"_{token}_"):
        for published in (_published(text), Redactor().public_text(text)):
            assert token not in _read(published)[0], published


async def test_a_title_the_rules_escape_still_fits_the_pull_request_title(make: Make) -> None:
    # The escaped form `defang` falls back to doubles each markdown character: this title
    # of 210 characters was cut to 200, then published as a 275-character title (GitHub
    # refuses a pull request title over 256).
    title = "Fixes \\#2 " + "a.b-c" * 40
    lc = await make(coding_command=command("say", "Done."))
    issue = await lc.open_issue(title=title)
    await lc.work()
    assert lc.task(issue).state == TaskState.DELIVERED
    [pull] = await lc.pulls()
    assert 0 < len(pull["title"]) <= 200, pull["title"]
    shown, _ = _read(pull["title"])
    assert not CLOSES.search(shown), pull["title"]
    assert shown.startswith("#2 a.b-c"), shown
