"""Runtime text made safe to publish on GitHub: no closing keyword for another issue, no
mention, no link off the repository's host.

What a runtime writes (its summary, question, reason) lands in pull request bodies and issue
comments, where GitHub acts on it: "Closes #1, fixes #2 and resolves owner/repo#3" closes
three issues when the pull request is merged, `@someone` notifies, a link or image leads
anywhere. `defang` is applied to that text after redaction and flattening (`Run.public`):

* a closing keyword (close/closes/closed, fix/fixes/fixed, resolve/resolves/resolved, any
  case, with or without a colon; GitHub's list) before a reference to any issue but the
  task's own (`#N`, `GH-N`, `owner/repo#N`, an issue or pull URL) is dropped, the reference
  kept as text;
* `@name` gets a zero-width space after the `@` (GitHub renders it as `@name`, and neither
  mentions nor autolinks an address from it);
* a markdown link or image to another host becomes its text with the address after it; a
  bare URL to another host stays as text; either way a zero-width space after `https:` (and
  in `www.`) keeps GitHub from linking it (still readable, never clickable); links to the
  repository's own host stay.

The text is NFKC-normalised and stripped of invisible characters first, so what is checked
is what is published: fullwidth `＃１` or `ｈｔｔｐｓ：／／` cannot slip past as lookalikes.

The rules read the markdown source; a reader sees it rendered, where backslash escapes,
HTML comments and tags, emphasis and code-span backticks are gone: `Fix<!-- -->es #2`,
`@**name**` or `[x](https\\://elsewhere)` read as a closing keyword, a mention and a link
there. So the result is read once more as GitHub renders it (`shown`, by markdown-it, a
CommonMark parser) and, when the rendering still closes another issue, mentions or links
elsewhere, the text is published as what a reader sees, with the rules applied to that and
every markdown character escaped (`plain`): no formatting, nothing hidden.

Bodies join texts defanged one by one (a summary and its approved plan, a run's
questions), so the result is also closed (`_closed`): a fence it leaves open is closed,
anything else left open makes it `plain`, and a reference definition to another host counts
as a link (another part could use it). Two safe texts joined by a blank line stay safe.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from html.parser import HTMLParser
from urllib.parse import urlsplit

from markdown_it import MarkdownIt
from markdown_it.token import Token

# Zero-width and other invisible format characters a writer could hide a keyword behind.
_INVISIBLE = re.compile("[\u00ad\u180e\u200b-\u200f\u202a-\u202e\u2060-\u2064\ufeff]")
_MENTION = re.compile(r"@(?=[A-Za-z0-9])")
_KEYWORD = r"\b(?:close[sd]?|fix(?:e[sd])?|resolve[sd]?)\b"
_REFERENCE = (
    r"(?:(?P<repo>[A-Za-z0-9_.-]+/[A-Za-z0-9_.-]+)?#(?P<number>\d+)"
    r"|GH-(?P<gh>\d+)"
    r"|(?P<url>https?://(?P<host>[^\s/]+)/(?P<url_repo>[^\s/]+/[^\s/]+)"
    r"/(?:issues|pull)/(?P<url_number>\d+)))"
)
# Markdown emphasis or a link bracket may sit between the keyword and the reference. A
# reference ends where its number does (`#2-`, `#2.` are #2), not inside a word (`#2a`).
_CLOSING = re.compile(
    rf"(?P<keyword>{_KEYWORD})(?P<gap>[\s:*_~`\[]*)(?P<reference>{_REFERENCE})(?!\w)",
    re.IGNORECASE,
)
# A code span (CommonMark: it opens and closes with whole backtick runs of one length); a
# backslash-escaped backtick opens none (GitHub would show what follows as prose, links and
# all).
_CODE_SPAN = re.compile(r"(?<![\\`])(`+)(?!`)(?:.*?[^`])?\1(?!`)")
# A markdown link or image, `[text](destination "title")`; its text may hold one level of
# brackets (a link inside a link's text).
_LINK = re.compile(
    r"(?P<image>!?)\[(?P<text>(?:[^\[\]]|\[[^\[\]]*\])*)\]\(\s*<?(?P<url>[^\s()<>]*)>?"
    r"(?:\s+(?:\"[^\"]*\"|'[^']*'|\([^()]*\)))?\s*\)"
)
# A reference definition, `[label]: destination`.
_DEFINITION = re.compile(r"^(?P<label>\s*\[[^\]]+\]:\s*)(?P<url>\S+)(?P<rest>.*)$")
_BARE_URL = re.compile(r"(?:(?:https?|ftp)://|www\.)[^\s<>`\"]+", re.IGNORECASE)
_TRAILING = ".,:;!?'\")]}*_~\\"
_FENCE = re.compile(r"^\s*(```|~~~)")
WITHHELD = "(text withheld: it could not be made safe to publish)"
# CommonMark 2.4: any ASCII punctuation character may be backslash-escaped, and an escaped
# one is shown as itself, never read as markup (no emphasis, link, code, HTML, heading,
# list, table or character reference can start from it).
_MARKDOWN_CHARACTER = re.compile(r"([!-/:-@\[-`{-~])")
# GitHub's markdown is CommonMark with extensions; of those, strikethrough and tables change
# what text is shown (bare URLs are checked as text: `_BARE_URL`). Raw HTML is on: GitHub
# passes it (sanitised), so a comment or a tag is hidden from the reader.
_MARKDOWN = MarkdownIt("commonmark", {"html": True}).enable(["strikethrough", "table"])


@dataclass(frozen=True)
class PublicPlace:
    """Where the text is published: the task's repository, its issue, and the host whose
    links may stay (the repository's web host, `github.com` for api.github.com)."""

    repo: str
    issue: int
    host: str

    @classmethod
    def of(cls, repo: str, issue: int, github_api_url: str) -> PublicPlace:
        return cls(repo=repo, issue=issue, host=web_host(github_api_url))


def web_host(github_api_url: str) -> str:
    """The host a repository's pages are on, from the API URL: `api.github.com` ->
    `github.com`; a GitHub Enterprise `https://HOST/api/v3` -> HOST."""
    host = (urlsplit(github_api_url).hostname or "").lower()
    return host.removeprefix("api.") if host == "api.github.com" else host


def normalize(text: str) -> str:
    """NFKC, without invisible characters: run before redaction and flattening too, so a
    fullwidth `＜img＞` or a fullwidth secret is what they see."""
    return _INVISIBLE.sub("", unicodedata.normalize("NFKC", text))


def defang(text: str, place: PublicPlace) -> str:
    """`text` with no closing keyword for another issue, no mention, no foreign link, in
    its source and as GitHub shows it (else `plain`), and closed (`_closed`): whatever is
    published after it in the same body is read as it would be alone."""
    text = _defanged(normalize(text), place)
    view = shown(text)
    if not _acts(view, place):
        balanced = _balanced(text)
        if balanced is not None:
            return balanced
    text = plain("\n".join(_defanged_plain(line, place) for line in view.text.split("\n")))
    # Escaped, the rules' result is what is shown; should it not be, nothing is published.
    return WITHHELD if _acts(shown(text), place) or not _closed(text) else text


def _balanced(text: str) -> str | None:
    """`text`, with the fence it leaves open closed (a summary ending in "```" would make
    the fence of whatever a body puts after it, a plan or the next question, its closing
    one, and that text's fenced image a live one); None when something else stays open (a
    `plain` text is published instead)."""
    if _closed(text):
        return text
    tokens = _MARKDOWN.parse(text)
    last = tokens[-1] if tokens else None
    if last is None or last.type != "fence" or last.level != 0:
        return None
    # CommonMark 4.5: a closing fence is the opening one's character, at least as many.
    closed = f"{text.rstrip()}\n{last.markup}"
    return closed if _closed(closed) else None


def _closed(text: str) -> bool:
    """Whether `text` leaves nothing open: a block after it and a blank line (as every body
    joins its parts) is a paragraph of its own, not the inside of a fence or an HTML block
    `text` began."""
    probe = "steelframe probe"
    tokens = _MARKDOWN.parse(f"{text}\n\n{probe}")
    if len(tokens) < 3:
        return False
    opened, inline, closed = tokens[-3:]
    return (
        (opened.type, inline.type, closed.type) == ("paragraph_open", "inline", "paragraph_close")
        and opened.level == 0
        and inline.content == probe
        and opened.map is not None
        and opened.map[0] == text.count("\n") + 2
    )


def within(limit: int, make: Callable[[int], str]) -> str:
    """`make(limit)`, or when that came out longer than `limit` (the escaped form `defang`
    falls back to doubles a line of markdown characters: a hostile 200-character issue title
    became a 388-character pull request title, past what GitHub takes) `make` of a shorter
    cut of the source. The source is cut, never the result: cutting escaped text could split
    an escape or a reference and show what the rules hid."""
    cut = limit
    while True:
        text = make(cut)
        if len(text) <= limit or cut <= 1:
            return text if len(text) <= limit else ""
        cut = max(1, min(cut - 1, cut * limit // len(text)))


def _defanged(text: str, place: PublicPlace) -> str:
    lines = []
    fenced = False
    for line in text.split("\n"):
        if _FENCE.match(line):
            fenced = not fenced
        elif not fenced:  # in a fenced block nothing is a link anyway
            line = _outside_code(line, lambda prose: _links(prose, place))
            line = _outside_code(line, lambda prose: _bare_urls(prose, place))
            line = _definition(line, place)
        lines.append(_MENTION.sub("@\u200b", _without_foreign_closing(line, place)))
    return "\n".join(lines)


def _defanged_plain(line: str, place: PublicPlace) -> str:
    """The rules on a line of text that will be published escaped (`plain`): all of it is
    prose there, backticks or fences in it open no code."""
    return _MENTION.sub("@\u200b", _without_foreign_closing(_bare_urls(line, place), place))


def _without_foreign_closing(line: str, place: PublicPlace) -> str:
    """Each closing keyword before another issue's reference dropped (the reference stays
    readable; nothing closes it). Until none is left: dropping one can join the words
    before it to the reference ("close closes #2")."""
    while True:
        changed = _CLOSING.sub(lambda m: _closing(m, place), line)
        if changed == line:
            return line
        line = changed


def _closing(match: re.Match[str], place: PublicPlace) -> str:
    if _is_own(match, place):
        return match.group(0)
    # Markup in the gap (`**`, `[`) stays so the text around it still renders.
    return re.sub(r"[\s:]", "", match.group("gap")) + match.group("reference")


def _is_own(match: re.Match[str], place: PublicPlace) -> bool:
    repo = place.repo.lower()
    if match.group("number") is not None:
        named = (match.group("repo") or place.repo).lower()
        return named == repo and int(match.group("number")) == place.issue
    if match.group("gh") is not None:
        return int(match.group("gh")) == place.issue
    return (
        match.group("host").lower() == place.host
        and match.group("url_repo").lower() == repo
        and int(match.group("url_number")) == place.issue
    )


def _outside_code(line: str, change: Callable[[str], str]) -> str:
    """`change` applied to the parts of `line` outside code spans."""
    parts, start = [], 0
    for span in _CODE_SPAN.finditer(line):
        parts += [change(line[start : span.start()]), span.group(0)]
        start = span.end()
    parts.append(change(line[start:]))
    return "".join(parts)


def _links(prose: str, place: PublicPlace) -> str:
    """Markdown links and images to another host, as text; again until none changes, so
    links nested deeper than one level are reached too."""
    while True:
        changed = _LINK.sub(lambda m: _link(m, place), prose)
        if changed == prose:
            return prose
        prose = changed


def _link(match: re.Match[str], place: PublicPlace) -> str:
    url = match.group("url")
    if _stays(url, place):
        # Kept, with any link inside its text undone (GitHub would make the inner one the
        # link: links do not nest).
        whole, offset = match.group(0), match.start(0)
        inner = _links(match.group("text"), place)
        return whole[: match.start("text") - offset] + inner + whole[match.end("text") - offset :]
    text = match.group("text").strip()
    # The link's text keeps no brackets, so the result is never a link again.
    shown = text.replace("[", "(").replace("]", ")")
    return f"{shown} ({_unlinked(url)})" if shown else _unlinked(url)


def _bare_urls(prose: str, place: PublicPlace) -> str:
    def replace(match: re.Match[str]) -> str:
        url = match.group(0)
        trimmed = url.rstrip(_TRAILING)
        tail = url[len(trimmed) :]
        return match.group(0) if _stays(trimmed, place) else _unlinked(trimmed) + tail

    return _BARE_URL.sub(replace, prose)


def _definition(line: str, place: PublicPlace) -> str:
    """A reference definition to another host is no definition any more (its brackets
    go, its address is text): `[text][label]` then renders as plain text."""
    match = _DEFINITION.match(line)
    if match is None or _stays(match.group("url"), place):
        return line
    label = match.group("label").replace("[", "").replace("]", "")
    return f"{label}{_unlinked(match.group('url'))}{match.group('rest')}"


def _stays(url: str, place: PublicPlace) -> bool:
    """A link that may stay: relative (on the repository's own host), or absolute http(s)
    on that host. One `urlsplit` cannot read (`https://[x`) does not stay: GitHub may still
    link what it makes of it."""
    try:
        parts = urlsplit(url if "://" in url or url.startswith("//") else _schemeless(url))
        host = parts.hostname or ""
    except ValueError:
        return False
    if not parts.scheme and not parts.netloc:
        return True
    return parts.scheme in ("http", "https", "") and host == place.host


def _schemeless(url: str) -> str:
    """`www.example.com/x` is a link on GitHub: read it as one."""
    return f"http://{url}" if url.lower().startswith("www.") else url


def _unlinked(url: str) -> str:
    """`url` as text GitHub links nowhere: a zero-width space inside each `://`, `//` at the
    start and `www.` (no markup to get wrong, whatever surrounds it)."""
    url = re.sub(r"^//", "/\u200b/", url.replace("://", ":\u200b//"))
    return re.sub(r"(?i)\b(www)\.", "\\1\u200b.", url)


@dataclass(frozen=True)
class Shown:
    """Markdown as a reader sees it once GitHub renders it: the text shown (blocks and line
    breaks as newlines, link and image titles beside their text; invisible characters kept,
    as the renderer keeps them), the part of
    it outside code (where GitHub links bare URLs), and every link and image address (seen
    on hovering, and in the page's source), and every reference definition's (text joined
    after it may link with it)."""

    text: str
    prose: str
    links: tuple[str, ...]

    @property
    def everything(self) -> str:
        """The text and the addresses, a line each: where a secret may be read."""
        return "\n".join((self.text, *self.links))


def shown(markdown: str) -> Shown:
    """What GitHub shows of `markdown`: escapes and character references resolved, HTML
    comments and tags hidden (the text between tags shown), emphasis and code markers gone."""
    text: list[str] = []
    prose: list[str] = []
    env: dict[str, dict[str, dict[str, str]]] = {}
    tokens = _MARKDOWN.parse(markdown, env)
    # A reference definition shows nothing, but a body this text is joined into may use it
    # (`[logo][label]` in one part, `[label]: https://elsewhere` in another): its address
    # counts as a link.
    links = [str(found.get("href", "")) for found in env.get("references", {}).values()]
    for token in tokens:
        if token.type == "inline":
            _inline(token.children or [], text, prose, links)
        elif token.type in ("code_block", "fence"):
            text.append(token.content)
        elif token.type == "html_block":
            html = _HTMLText(links)
            prose.append(html.text(token.content))
            text.append(prose[-1])
        if token.nesting == -1 or token.type in ("code_block", "fence", "html_block"):
            text.append("\n")
            prose.append("\n")
    return Shown("".join(text).strip("\n"), "".join(prose), tuple(links))


def _inline(tokens: Iterable[Token], text: list[str], prose: list[str], links: list[str]) -> None:
    for token in tokens:
        if token.type == "text":
            text.append(token.content)
            prose.append(token.content)
        elif token.type == "code_inline":
            text.append(token.content)
            prose.append(" ")  # a code span ends a bare URL
        elif token.type in ("softbreak", "hardbreak"):
            text.append("\n")
            prose.append("\n")
        elif token.type == "html_inline":
            # A tag or comment shows nothing; a link tag's address is a link all the same.
            _HTMLText(links).text(token.content)
        elif token.type == "link_open":
            links.append(str(token.attrs.get("href", "")))
        elif token.type == "image":
            links.append(str(token.attrs.get("src", "")))
            _inline(token.children or [], text, prose, links)  # its alternative text
        if "title" in token.attrs:  # shown on hovering
            text.append(f" {token.attrs['title']} ")


class _HTMLText(HTMLParser):
    """The text a browser shows of an HTML fragment (comments hidden), noting the addresses
    its tags link to or load."""

    def __init__(self, links: list[str]) -> None:
        super().__init__(convert_charrefs=True)
        self._links = links
        self._shown: list[str] = []

    def text(self, fragment: str) -> str:
        self.feed(fragment)
        self.close()
        return "".join(self._shown)

    def handle_data(self, data: str) -> None:
        self._shown.append(data)

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self._links += [value or "" for name, value in attrs if name in ("href", "src")]


def _acts(view: Shown, place: PublicPlace) -> bool:
    """Whether GitHub would act on the shown text: a closing keyword for another issue, a
    mention, a link to another host."""
    if _MENTION.search(view.text):
        return True
    if any(not _is_own(match, place) for match in _CLOSING.finditer(view.text)):
        return True
    bare = (url.group(0).rstrip(_TRAILING) for url in _BARE_URL.finditer(view.prose))
    return not all(_stays(url, place) for url in (*view.links, *bare))


def plain(text: str) -> str:
    """`text` as markdown that shows exactly it: every markdown character escaped, each line
    without leading blanks (no indented code block), so nothing in it is markup."""
    return "\n".join(_MARKDOWN_CHARACTER.sub(r"\\\1", line.lstrip()) for line in text.split("\n"))
