"""Known secret values, and text with them taken out before it is stored, posted or pushed.

A `Redactor` holds the exact values the worker knows to be secret (the webhook secret, the
App key's lines, installation tokens it minted, database and Redis passwords, the model keys
the operator passes to the coding runtime) and replaces each occurrence with `[REDACTED]`.
It finds what it was told about, nothing else: a secret the worker never knew (one the
runtime made up, or found elsewhere) is not recognised by value. Text bound for a public
place gets `mask_token_shapes` too (what is shaped like a GitHub, model, cloud or Slack
token or an Authorization header's value): `public_text` masks them, and flattens text for
an issue comment: one paragraph, no HTML comments (so no marker a webhook handler would act
on), no mentions, bounded. Public text is checked twice: as written, and as GitHub shows it
(`public_text.shown`), where markdown a reader never sees can no longer split a value
(`sk\\-...`, `sk-a<!-- -->b`, `sk-a**b**`, `` sk-a`b` ``); text that shows one that way is
published as what a reader sees, masked and escaped (`public_text.plain`).

An encoded form is also found written wrapped, as `base64` (76 columns), `openssl base64`
(64) and `xxd -p` (60) write it: the text is searched once more with its whitespace taken
out (`joined`), and, for `contains_secret`, with a patch's line prefixes taken out too
(`git log --patch` starts each line with `+`, `-` or a space). A wrapped form is masked
whole, from its first line to its last, as one value is.
"""

from __future__ import annotations

import base64
import bisect
import html
import re
import threading
from collections.abc import Iterable, Iterator, Mapping
from urllib.parse import urlsplit

import ahocorasick

from bot.config import Settings
from bot.lifecycle.public_text import PublicPlace, defang, normalize, plain, shown, within
from memory.secrets import MASK, TOKEN_SHAPES

# Shorter values are too likely to occur by chance (and to wreck ordinary text).
MIN_SECRET = 8
# Values at least this long are also known base64- and hex-encoded (`encoded_forms`): a
# shorter one's base64 core would be short enough to turn up in any large binary by chance.
MIN_ENCODED = 16
MAX_PUBLIC = 300
_MARKUP = re.compile(r"<!--|-->|<\s*/?\s*[a-zA-Z!][^>]*>")
_MENTION = re.compile(r"@(?=[A-Za-z0-9])")
_URL_SAFE = str.maketrans("+/", "-_")  # base64's URL-safe alphabet
# A character reference (CommonMark 6.2: decimal, hexadecimal, or an HTML5 entity name):
# GitHub shows the character it names, so `&#64;name` mentions and notifies, `sk-&#102;oo`
# shows a secret, `&lt;!--` is no marker but `&#70;ixes &#35;2` closes #2.
_CHARACTER_REFERENCE = re.compile(
    r"&(?:#[0-9]{1,7}|#[xX][0-9a-fA-F]{1,6}|[A-Za-z][A-Za-z0-9]{1,31});"
)
# What an Authorization header's value may start with; the rest is the secret.
_SCHEME = re.compile(r"(?i)^(?:bearer|token|basic) ")
# The one character `git diff` puts before each line of a hunk: added, removed, context.
_PATCH_PREFIX = re.compile(r"^[-+ ]", re.MULTILINE)


def mask_token_shapes(text: str) -> str:
    """`text` with every token-shaped piece (TOKEN_SHAPES) replaced by MASK."""
    return TOKEN_SHAPES.sub(MASK, text)


class Redactor:
    """Thread-safe: a run adds the tokens it mints while other threads redact."""

    def __init__(self, values: Iterable[str] = ()) -> None:
        self._lock = threading.Lock()
        self._values: set[str] = set()
        self._forms: set[str] = set()  # the values' encoded forms (`encoded_forms`)
        self._matcher: _Matcher | None = None
        # The encoded forms alone, searched in text without its whitespace (`joined`): not
        # the values, whose pieces a space may join by chance ("pass word").
        self._wrapped: _Matcher | None = None
        self.add(*values)

    def add(self, *values: str | None) -> None:
        fresh = {v.strip() for v in values if v and len(v.strip()) >= MIN_SECRET}
        with self._lock:
            if fresh - self._values:
                self._values |= fresh
                self._forms |= {form for v in fresh for form in encoded_forms(v)}
                self._matcher = _Matcher(self._values | self._forms)
                self._wrapped = _Matcher(self._forms) if self._forms else None

    @property
    def longest_value(self) -> int:
        """The length of the longest text searched for, a secret or an encoded form of one
        (text searched in pieces overlaps by this)."""
        with self._lock:
            return max(map(len, self._values | self._forms), default=0)

    def redact(self, text: str) -> str:
        """`text` with each known value and encoded form masked, a wrapped form whole."""
        matcher = self._matcher
        return text if matcher is None or not text else self._unwrapped(matcher.masked(text))

    def contains_secret(self, text: str | bytes) -> bool:
        """Whether `text` holds a known value or an encoded form of one: as written, wrapped
        across lines, or wrapped in a patch's lines (`+`, `-`, space before each)."""
        matcher, wrapped = self._matcher, self._wrapped
        if matcher is None:
            return False
        if isinstance(text, bytes):
            text = text.decode("utf-8", errors="replace")
        if matcher.found_in(text):
            return True
        return wrapped is not None and (
            wrapped.found_in(joined(text)) or wrapped.found_in(joined(unprefixed(text)))
        )

    def _unwrapped(self, text: str) -> str:
        """`text` with each encoded form that whitespace splits (a wrapped base64 or hex
        dump) masked, from its first character to its last, line breaks and all."""
        wrapped = self._wrapped
        if wrapped is None or not wrapped.found_in(joined(text)):
            return text
        words = text.split()  # as `joined` splits it, so the two agree
        starts: list[int] = []  # where each word starts in the joined text
        places: list[int] = []  # and in `text`
        length = place = 0
        for word in words:
            place = text.find(word, place)  # only whitespace lies before it
            starts.append(length)
            places.append(place)
            length += len(word)
            place += len(word)
        compact = "".join(words)

        def at(index: int) -> int:  # position in `text` of the joined text's `index`
            word = bisect.bisect_right(starts, index) - 1
            return places[word] + index - starts[word]

        pieces: list[str] = []
        kept = 0
        for start, end in wrapped.spans(compact):
            pieces += (text[kept : at(start)], MASK)
            kept = at(end - 1) + 1
        return "".join(pieces) + text[kept:]

    def redact_data(self, value: object) -> object:
        """The same for JSON-like data (event data, log records)."""
        if isinstance(value, str):
            return self.redact(value)
        if isinstance(value, Mapping):
            return {str(k): self.redact_data(v) for k, v in value.items()}
        if isinstance(value, list | tuple):
            return [self.redact_data(v) for v in value]
        return value

    def public_text(self, text: str, limit: int = MAX_PUBLIC) -> str:
        """Redacted (known values and token shapes), one line, no markup or mentions, at
        most `limit` characters. Checked as GitHub shows it (`rendered`, `_unseen`)."""
        seen = rendered(text)
        flat = " ".join(self._unseen(self._flattened(seen), seen).split())
        return flat if len(flat) <= limit else flat[: limit - 1] + "…"

    def public_block(self, text: str, limit: int = 4000) -> str:
        """As `public_text`, but keeping line breaks (a question, a summary)."""
        lines = [self.public_text(line, limit) for line in self.redact(text).splitlines()]
        block = self._unseen("\n".join(lines).strip(), rendered(text))
        return block if len(block) <= limit else block[: limit - 1] + "…"

    def published(
        self, text: str, place: PublicPlace, limit: int, *, keep_lines: bool = False
    ) -> str:
        """Text from outside (a runtime's words, a check's name, an issue title) as it may go
        public at `place`: normalised, redacted, flattened (or with its line breaks kept),
        defanged, at most `limit` characters however the rules escaped it."""
        made = self.public_block if keep_lines else self.public_text
        return within(limit, lambda cut: defang(made(normalize(text), cut), place))

    def _flattened(self, text: str) -> str:
        flat = _MARKUP.sub(" ", mask_token_shapes(self.redact(text)))
        return _MENTION.sub("@\u200b", " ".join(flat.split()))

    def _unseen(self, published: str, source: str) -> str:
        """`published`, or when GitHub would show a secret in it (one the source shows, or
        any piece of one, or one the markup around it joins), the source as a reader sees
        it, masked and escaped; or MASK alone if even that still shows one."""
        found = self._secrets_shown(source)
        if not self._shows(published, found):
            return published
        seen = normalize(shown(source).text)
        for value in sorted(found, key=len, reverse=True):
            seen = seen.replace(value, MASK)
        masked = mask_token_shapes(self.redact(seen)).split("\n")
        lines = (" ".join(_MARKUP.sub(" ", line).split()) for line in masked)
        escaped = _MENTION.sub("@\u200b", plain("\n".join(line for line in lines if line)))
        return MASK if self._shows(escaped, found) else escaped

    def _shows(self, published: str, found: set[str]) -> bool:
        """Whether GitHub would show a secret of `published`, or any MIN_SECRET characters
        of one in `found` (a value masked in part is not masked)."""
        if self._secrets_shown(published):
            return True
        seen = normalize(shown(published).everything)
        wrapped = self._wrapped
        if wrapped is not None and wrapped.found_in(joined(seen)):
            return True
        return any(
            value[start : start + MIN_SECRET] in seen
            for value in found
            for start in range(len(value) - MIN_SECRET + 1)
        )

    def _secrets_shown(self, markdown: str) -> set[str]:
        """The secrets GitHub would show of `markdown`: known values and token-shaped text
        (an Authorization header's value without its scheme), as a reader sees them."""
        seen = normalize(shown(markdown).everything)
        found = {m.group() for m in TOKEN_SHAPES.finditer(seen) if m.group() != MASK}
        found = {_SCHEME.sub("", value, count=1) for value in found}
        matcher = self._matcher
        if matcher is not None:
            found |= {seen[start:end] for start, end in matcher.spans(seen)}
        return {value for value in found if len(value) >= MIN_SECRET and value != MASK}

    def __len__(self) -> int:
        return len(self._values)


class _Matcher:
    """Every occurrence of a fixed set of strings, found in one pass over the text (an
    Aho-Corasick automaton from pyahocorasick), leftmost first and, of those starting at one
    place, the longest, so a value containing another is masked whole: what one regular
    expression of the values, longest first, finds.

    Why not one regular expression of the values: `re` tries each alternative at every
    position (a run's log is searched for hundreds of values: the key's lines and each
    value's encoded forms), and compiling it again for every token a run mints cost ~20 ms.
    Built once per set of values and never changed after, so threads may search it at once.
    """

    def __init__(self, words: Iterable[str]) -> None:
        self._automaton = ahocorasick.Automaton()
        for word in words:
            self._automaton.add_word(word, len(word))
        self._automaton.make_automaton()

    def spans(self, text: str) -> Iterator[tuple[int, int]]:
        """(start, end) of each match, left to right, none overlapping.

        From every match (`iter`), not the automaton's own `iter_long`: that one missed a
        value after a partial match of it (pyahocorasick 2.3: 'abaabaaa' in 'babaabaaa'),
        and a secret it misses is published (tests/test_redact.py holds the two equal)."""
        longest: dict[int, int] = {}
        for last, length in self._automaton.iter(text):
            start = last + 1 - length
            longest[start] = max(length, longest.get(start, 0))
        kept = 0
        for start in sorted(longest):
            if start >= kept:
                kept = start + longest[start]
                yield start, kept

    def masked(self, text: str) -> str:
        pieces: list[str] = []
        kept = 0
        for start, end in self.spans(text):
            pieces += (text[kept:start], MASK)
            kept = end
        return text if not pieces else "".join(pieces) + text[kept:]

    def found_in(self, text: str) -> bool:
        return next(self._automaton.iter(text), None) is not None


def encoded_forms(value: str) -> set[str]:
    """What `value` looks like written down by an agent that meant no harm (a Kubernetes
    Secret, a Basic header, a config file): hex, and base64 at each of the three byte
    offsets it can start at inside a longer blob, standard and URL-safe. For base64, only
    the characters made of `value`'s bits alone: those at either end also hold bits of
    whatever comes before or after it. Exact values only; anything made to hide (a cipher,
    a split) is still not recognised (docs/lifecycle.md, "What the sandbox does not protect
    against")."""
    if len(value) < MIN_ENCODED:
        return set()
    raw = value.encode()
    forms = {raw.hex(), raw.hex().upper()}
    for offset in range(3):
        bits = 8 * (offset + len(raw))
        core = base64.b64encode(b"\0" * offset + raw).decode()[(8 * offset + 5) // 6 : bits // 6]
        forms |= {core, core.translate(_URL_SAFE)}
    return forms


def joined(text: str) -> str:
    """`text` without its whitespace: a wrapped encoding's lines as one."""
    return "".join(text.split())


def unprefixed(patch: str) -> str:
    """A patch's text without the character before each line (`+`, `-`, a space)."""
    return _PATCH_PREFIX.sub("", patch)


def rendered(text: str) -> str:
    """`text` with every character reference replaced by the character GitHub shows for it
    (again until none is left: `&amp;#64;` is `@` after two), then normalised as public
    text is (`public_text.normalize`: a decoded `&#x200b;` hides nothing)."""
    while True:
        decoded = _CHARACTER_REFERENCE.sub(lambda ref: html.unescape(ref.group()), text)
        if decoded == text:
            return normalize(text)
        text = decoded


def _url_password(url: str | None) -> str | None:
    if not url:
        return None
    try:
        return urlsplit(url).password
    except ValueError:
        return None


def key_lines(pem: str) -> list[str]:
    """The body lines of a PEM (each one a piece of the key), and the whole body joined."""
    body = [line.strip() for line in pem.replace("\\n", "\n").splitlines() if "-----" not in line]
    body = [line for line in body if line]
    return [*body, "".join(body)] if body else []


def from_settings(settings: Settings, environ: Mapping[str, str]) -> Redactor:
    """Every secret value the settings (and the variables passed to the runtime) hold."""
    values: list[str | None] = []
    for secret in (settings.webhook_secret, settings.openai_api_key, settings.anthropic_api_key):
        values.append(secret.reveal() if secret is not None else None)
    try:
        pem = settings.private_key_pem()
    except Exception:  # an unreadable key file is reported where the key is used
        pem = None
    if pem is not None:
        values += key_lines(pem.reveal())
    values += [_url_password(settings.database_url), _url_password(settings.redis_url)]
    values += [environ.get(name) for name in settings.coding_env_passthrough]
    return Redactor(v for v in values if v)
