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
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Callable
from dataclasses import dataclass
from urllib.parse import urlsplit

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
# Markdown emphasis or a link bracket may sit between the keyword and the reference.
_CLOSING = re.compile(
    rf"(?P<keyword>{_KEYWORD})(?P<gap>[\s:*_~`\[]*)(?P<reference>{_REFERENCE})(?![\w-])",
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
    """`text` with no closing keyword for another issue, no mention, no foreign link."""
    text = normalize(text)
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
    on that host."""
    parts = urlsplit(url if "://" in url or url.startswith("//") else _schemeless(url))
    if not parts.scheme and not parts.netloc:
        return True
    return parts.scheme in ("http", "https", "") and (parts.hostname or "") == place.host


def _schemeless(url: str) -> str:
    """`www.example.com/x` is a link on GitHub: read it as one."""
    return f"http://{url}" if url.lower().startswith("www.") else url


def _unlinked(url: str) -> str:
    """`url` as text GitHub links nowhere: a zero-width space inside each `://`, `//` at the
    start and `www.` (no markup to get wrong, whatever surrounds it)."""
    url = re.sub(r"^//", "/\u200b/", url.replace("://", ":\u200b//"))
    return re.sub(r"(?i)\b(www)\.", "\\1\u200b.", url)
