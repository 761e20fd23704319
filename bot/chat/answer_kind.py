"""The kind of answer a question asks for, and whether a text holds a value of that kind
(docs/memory.md, Answerability: the verdict's `kind_missing`).

"How many shows can a Hobby account have?" asks for a count of shows; a thread about Hobby
accounts that holds every word of the question but no number of shows does not answer it.
The question forms are English grammar, not a domain's words (like the filing grammar):
a short list of interrogatives mapped to the kind of value they ask for. The values are
found by their shape (numbers, percentages, dates, versions), never by a domain's terms.
"""

from __future__ import annotations

import re
from enum import StrEnum


class Kind(StrEnum):
    COUNT = "count"  # how many <things>: a number next to the things counted
    QUANTITY = "quantity"  # how much / long / big / often, what size or limit: a number
    SHARE = "share"  # what share / percentage / proportion: a percentage or a fraction
    DATE = "date"  # when did / what date: a date
    VERSION = "version"  # which version: a version number


# The counted noun runs to the first of these (the verb or article of the question).
_STOP = frozenset(
    "a an the are is was were be been do does did can could may might must shall should will"
    " would have has had of in on at for to by with from per each every and or that which who"
    " we you they it our your their there get got".split()
)
_NUMBER_WORDS = frozenset(
    "one two three four five six seven eight nine ten eleven twelve fifteen twenty thirty"
    " forty fifty sixty hundred hundreds thousand thousands million millions dozen dozens"
    " no none zero single couple".split()
)
_COUNT = re.compile(r"\bhow\s+many\s+((?:[\w'-]+\s+){0,3}[\w'-]+)", re.I)
_FORMS = (
    (
        Kind.SHARE,
        re.compile(
            r"\b(?:what|which)\s+(?:\w+\s+)?(?:share|percentage|percent|proportion|fraction"
            r"|ratio|cut)\b|\bhow\s+many\s+percent",
            re.I,
        ),
    ),
    (
        Kind.VERSION,
        re.compile(r"\b(?:what|which)\s+(?:[\w'-]+\s+){0,3}(?:version|release)\b", re.I),
    ),
    (
        Kind.DATE,
        re.compile(
            # "what date is the audit?" asks a date; "what date goes into X?" which date
            r"^\W*(?:since\s+)?when\s+(?:did|was|were|will)\b"
            r"|\b(?:what|which)\s+(?:date|day|month|year)\s+(?:is|was|were|will|did)\b",
            re.I,
        ),
    ),
    (
        Kind.QUANTITY,
        re.compile(
            r"\bhow\s+(?:much|long|big|large|small|often|far|fast|slow|old|heavy|high|low)\b"
            # "what is the maximum...": a value; "which amount do reminders show?" may be
            # answered by a name ("the open amount")
            r"|\bwhat\s+(?:is|are|was)\s+the\s+(?:maximum|minimum|max|min|size|limit|length"
            r"|price|cost|fee|duration)\b",
            re.I,
        ),
    ),
)

_NUMBER = r"[$€£]?\d[\d,]*(?:\.\d+)?"
# A quantity: a number standing as a word (not part of an identifier such as #201, R2,
# L4s or @user1), with an optional unit glued to it (4GB, 30s, 2x, 99.9%).
_QUANTITY = re.compile(rf"(?<![\w#@/.-]){_NUMBER}(?:[a-zA-Z%]{{0,3}})?(?![\w/])")
_NUMBER_WORD = re.compile(
    r"\b(?:" + "|".join(sorted(_NUMBER_WORDS - {"no", "none", "single", "couple"})) + r")\b"
    r"|\b(?:half|twice|double|triple|once|daily|weekly|monthly|hourly|nightly|yearly"
    r"|annually|quarterly|(?:an?|every|each)\s+(?:second|minute|hour|day|week|month|quarter"
    r"|year))\b",
    re.I,
)
_SHARE = re.compile(
    rf"(?<![\w#@/-]){_NUMBER}\s*(?:%|percent\b|per\s*cent\b|pp\b)|\b\d+\s+(?:in|out\s+of)\s+\d+\b"
    r"|\b(?:half|a\s+third|a\s+quarter|two\s+thirds|three\s+quarters)\b",
    re.I,
)
_MONTHS = (
    "january|february|march|april|june|july|august|september|october|november|december"
    "|jan|feb|mar|apr|jun|jul|aug|sep|sept|oct|nov|dec"
)
_DATE = re.compile(
    r"\b(?:19|20)\d\d-\d\d(?:-\d\d)?\b|\b\d{1,2}/\d{1,2}(?:/\d{2,4})?\b"
    rf"|\b(?:{_MONTHS})\b\.?(?:\s+\d{{1,2}}\b)?|\b\d{{1,2}}(?:st|nd|rd|th)?\s+(?:{_MONTHS})\b"
    r"|\bmay\s+\d{1,2}\b|\b\d{1,2}\s+may\b|\b(?:19|20)\d\d\b|\bq[1-4]\b"  # may: a verb too
    r"|\b(?:monday|tuesday|wednesday|thursday|friday|saturday|sunday|yesterday|today)\b"
    r"|\b(?:last|this|next)\s+(?:week|month|year|quarter)\b|\b\d+\s+(?:days?|weeks?|months?"
    r"|years?)\s+ago\b",
    re.I,
)
_VERSION = re.compile(
    r"(?<![\w#@/-])v?\d+(?:\.\d+)+\b|\bv\d+\b|\b(?:version|release)\s+v?\d+", re.I
)


def asked_kind(question: str) -> tuple[Kind | None, tuple[str, ...]]:
    """The kind of answer the question asks for (None: a question of no such kind) and,
    for a count, the words of the thing counted ("how many shows can..." -> ("shows",))."""
    count = _COUNT.search(question)
    if count:
        words = []
        for word in count.group(1).lower().split():
            if word in _STOP:
                break
            words.append(word)
        if not (words and words[0] == "percent"):
            return Kind.COUNT, tuple(words)
    for kind, form in _FORMS:
        if form.search(question):
            return kind, ()
    return None, ()


def holds(kind: Kind, counted: tuple[str, ...], text: str, question: str = "") -> bool:
    """Does `text` hold a value of `kind`? A value the question itself holds (its "2025")
    is not an answer to it. A count must stand next to a word of the thing counted
    ("three shows", "shows: 3", "1,900 accounts"), not anywhere in the text."""
    asked = {m.group(0).lower() for m in _QUANTITY.finditer(question)}

    def fresh(pattern: re.Pattern[str]) -> bool:
        return any(m.group(0).lower() not in asked for m in pattern.finditer(text))

    if kind is Kind.SHARE:
        return fresh(_SHARE)
    if kind is Kind.VERSION:
        return fresh(_VERSION)
    if kind is Kind.DATE:
        return fresh(_DATE)
    if kind is Kind.QUANTITY:
        return fresh(_QUANTITY) or bool(_NUMBER_WORD.search(text))
    if not counted:  # "how many were affected?": any number
        return fresh(_QUANTITY) or bool(_NUMBER_WORD.search(text))
    return _count_near(counted, text, asked)


def _stem(word: str) -> str:
    """A crude stem: enough to match "show" and "shows", "account" and "accounts"."""
    bare = word.lower().strip(".,:;!?()'\"")
    return bare[:5] if len(bare) > 5 else bare.rstrip("s")


def _is_number(token: str, asked: set[str]) -> bool:
    bare = token.strip(".,:;!?()'\"~").lower()
    if bare in _NUMBER_WORDS - {"no", "none", "single", "couple"}:
        return True
    return bool(_QUANTITY.fullmatch(bare)) and bare not in asked


AFTER = 8  # tokens after the counted word, in its sentence, a count may stand at


def _count_near(counted: tuple[str, ...], text: str, asked: set[str]) -> bool:
    """A number, then at most two other words (not a stop word: "60 per show" is a rate),
    then a word of the thing counted; or the counted word, then a number later in its
    sentence."""
    stems = {_stem(w) for w in counted if len(w) > 2}
    tokens = text.split()
    for i, token in enumerate(tokens):
        if _stem(token) not in stems:
            continue
        for j in range(i - 1, max(i - 4, -1), -1):
            before = tokens[j]
            if _is_number(before, asked):
                return True
            if before.lower().strip(".,:;!?()'\"") in _STOP or before.endswith((".", ",", ":")):
                break
        # ...or later in its sentence ("subscriptions move ...; about 340 are left")
        for k in range(i + 1, min(i + 1 + AFTER, len(tokens))):
            rate = k + 1 < len(tokens) and tokens[k + 1].lower() in {"per", "/"}
            if _is_number(tokens[k], asked) and not rate:  # "60 per crate" is a rate
                return True
            if tokens[k].endswith((".", "!", "?")):
                break
    return False


def kind_missing(question: str, texts: list[str]) -> str:
    """The kind of answer the question asks for that none of `texts` holds a value of
    ("" when the question asks for no such kind, or one of them holds one)."""
    kind, counted = asked_kind(question)
    if kind is None or any(holds(kind, counted, t, question) for t in texts):
        return ""
    return kind.value
