"""What the operator's own message asks for: a new filing, a memory, or an answer to the
proposal waiting on the session (confirm it, decline it, or neither).

One grammar: the server's intent policy (bot/chat/intents.py) and the offline runtime
(bot/runtimes/offline.py) both read requests through `filing_request` and `memory_request`,
so a phrasing that files in one files in the other. A question is never a request
(`asks_a_question`): "should we file an issue?" gets an answer, not a proposal.

Only the operator's message of the turn is ever read here; retrieved memory, issue bodies
and comments never reach these functions, so however they are worded they cannot file.
When in doubt the answer is "no side effect": a proposal stays pending for an explicit
confirmation (a later message, the TUI's `y`, the GUI's File button, POST .../chat/file).
"""

from __future__ import annotations

import re
from enum import StrEnum


class ProposalReply(StrEnum):
    CONFIRM = "confirm"  # file the pending proposal now
    DECLINE = "decline"  # drop it
    OTHER = "other"  # neither: it stays pending


# Courtesies and connectives that may open a request ("ok so please ...").
_OPENERS = (
    r"(?:(?:please|pls|ok|okay|so|and|then|now|also|alright|right|great|cool|good|fine|"
    r"yes|yeah|yep|yup|sure|hey|hi)\b[\s,!.]*)*"
)
_POLITE = (
    r"(?:(?:can|could|would|will)\s+you\s+(?:please\s+)?|(?:i'd|i\s+would)\s+like\s+you\s+to\s+)?"
)
_LEAD = r"^" + _OPENERS + _POLITE + r"(?:just\s+)?(?:go\s+ahead\s+and\s+)?(?:please\s+)?"
_NOUN = r"(?:github\s+)?(?:issue|ticket|task|bug(?:\s+report)?)"
_ISSUE_VERB = r"(?:file|open|create|raise|log|make|write\s+up|add|submit|start)"

# A request for a NEW issue. Questions, negations and references to an existing issue
# ("open the issue about login") do not match.
_ASK_TO_FILE = re.compile(
    "|".join(
        [
            # file an issue for ..., open a new ticket about ..., create one more bug
            _LEAD + _ISSUE_VERB + r"\s+(?:me\s+|us\s+)?"
            r"(?:(?:an?|one|another|one\s+more)\s+(?:new\s+)?|new\s+)" + _NOUN + r"\b",
            # let's file an issue for ..., let us open a ticket
            r"^"
            + _OPENERS
            + r"(?:let's|lets|let\s+us)\s+(?:go\s+ahead\s+and\s+)?"
            + _ISSUE_VERB
            + r"\s+(?:an?\s+|one\s+|a\s+new\s+)?"
            + _NOUN
            + r"\b",
            # I need / I'd like / we need an issue (filed) for ...
            r"^" + _OPENERS + r"(?:i|we)\s+(?:need|want|would\s+like|'d\s+like)\s+"
            r"(?:you\s+to\s+file\s+)?(?:an?\s+|a\s+new\s+)" + _NOUN + r"\b",
            r"^" + _OPENERS + r"(?:i'd|we'd)\s+like\s+(?:an?\s+|a\s+new\s+)" + _NOUN + r"\b",
            # please file this as an issue; file that as a ticket
            _LEAD
            + r"(?:file|open|log|raise|track)\s+(?:this|that|it)\s+(?:as|in)\s+(?:an?\s+)?"
            + _NOUN
            + r"\b",
            # file the work
            _LEAD + r"file\s+(?:the\s+|this\s+)?work\b",
        ]
    ),
    re.IGNORECASE,
)
# remember that ..., please remember: ..., remember this: ..., remember we deploy ...;
# not "remember when/what ..." (a question about the past) and not "do you remember".
_ASK_TO_REMEMBER = re.compile(
    "|".join(
        [
            _LEAD + r"(?:remember|memorize|memorise|note\s+down|make\s+a\s+note|keep\s+in\s+mind"
            r"|note)(?:\s+(?:that|this))?\s*[:,-]?\s+"
            r"(?!(?:when|what|how|why|which|who|whom|whose|where|if|whether)\b)(?=\S)",
            _LEAD + r"(?:remember|memorize|memorise)\s+(?:this|that)\s*[:.!]?\s*$",
            _LEAD + r"file\s+(?:a\s+|this\s+as\s+a\s+)?memory\b",
            _LEAD + r"(?:add|save|commit|store)\s+(?:this|that|it)\s+(?:to|in|as)\s+"
            r"(?:the\s+)?(?:committed\s+)?memory\b",
        ]
    ),
    re.IGNORECASE,
)

# -- answers to a pending proposal ------------------------------------------------------

_NEGATION = re.compile(
    r"\b(?:no|not|nope|nah|don't|dont|do\s+not|never|cancel|stop|wait|hold|later|"
    r"shouldn't|should\s+not|won't|rather\s+not|without|instead|but|however|first|"
    r"change|rename|edit|tweak|reword|before)\b",
    re.IGNORECASE,
)
_DECLINE = re.compile(
    r"^(?:no|nope|nah|no\s+thanks?|no,?\s+thank\s+you|cancel(?:\s+(?:it|that|this))?|"
    r"don't(?:\s+(?:file|open|create|remember|save|do)\s*(?:it|that|this|one|anything)?)?|"
    r"do\s+not(?:\s+(?:file|open|create|remember|save|do)\s*(?:it|that|this|one|anything)?)?|"
    r"never\s*mind|forget\s+(?:it|that|about\s+it)|scratch\s+that|drop\s+(?:it|that)|"
    r"let's\s+not|lets\s+not|let\s+us\s+not|skip\s+(?:it|that)|discard\s+(?:it|that)|"
    r"no\s+need|not\s+needed|not\s+necessary|leave\s+it|i'd\s+rather\s+not)\b",
    re.IGNORECASE,
)
_ASSENT = (
    r"yes|yeah|yep|yup|yes\s+please|sure|sure\s+thing|ok|okay|k|alright|all\s+right|"
    r"absolutely|definitely|certainly|of\s+course|confirm(?:ed)?|approved?|agreed|"
    r"go|go\s+ahead|go\s+for\s+it|do\s+it|do\s+that|please\s+do|proceed|ship\s+it|"
    r"make\s+it\s+so|sounds\s+good|looks\s+good|lgtm|works\s+for\s+me|that\s+works|"
    r"let's\s+do\s+it|let's\s+do\s+that|lets\s+do\s+it|let's\s+go|go\s+on|affirmative|y|"
    r"please\s+go\s+ahead|you\s+can|you\s+may|that's\s+fine|fine\s+by\s+me|"
    r"yes\s+indeed|that's\s+right"
)
# Words that may accompany an assent but are not one alone ("great" may only mean "thanks
# for the answer").
_FILLER = r"please|perfect|great|good|fine|cool|thanks|thank\s+you|right|exactly|correct|then|now"
_DO_VERB = r"(?:file|open|create|raise|log|submit|remember|save|record|add|commit|note)"
_THING = (
    r"(?:it|that|this|them|one|the\s+(?:issue|ticket|bug|task|memory|proposal|fact|note)|"
    r"the\s+(?:proposed\s+)?(?:issue|ticket|one)|that\s+(?:issue|ticket|one|memory)|"
    r"this\s+(?:issue|ticket|one|memory))"
)
# One confirmation: words of assent and/or "file it" (in any order, with courtesies).
_CONFIRM_PART = (
    r"(?:"
    + _ASSENT
    + r"|"
    + _FILLER
    + r"|(?:(?:can|could|would|will)\s+you\s+)?(?:please\s+)?(?:go\s+ahead\s+(?:and\s+)?)?"
    + _DO_VERB
    + r"\s+"
    + _THING
    + r"(?:\s+(?:now|please|then|for\s+me|as\s+(?:an?\s+)?(?:issue|ticket|memory)))*"
    r"|i\s+(?:do\s+)?(?:confirm|agree|approve)|(?:i'm|i\s+am)\s+(?:happy|fine|ok|okay)\s+with\s+"
    r"(?:it|that|this)|(?:yes\s+)?(?:it|that|this)\s+(?:is\s+|sounds\s+|looks\s+)?(?:good|fine|"
    r"great|right|correct|perfect)|(?:please\s+)?(?:file|remember|save)\s+away|"
    r"(?:you\s+)?(?:have|got)\s+my\s+(?:ok|okay|approval|go-ahead|blessing)"
    r")"
)
_CONFIRM = re.compile(
    r"^(?:" + _CONFIRM_PART + r")(?:[\s,;:!.\-]+(?:" + _CONFIRM_PART + r"))*$",
    re.IGNORECASE,
)
# What makes a confirmation of parts: an assent, or naming the action itself.
_STRONG = re.compile(
    r"^(?:" + _ASSENT + r")$|" + r"\b" + "(?:file|open|create|raise|log|submit|remember|save|"
    r"record|add|commit|note)\s+(?:it|that|this|them|one|the|away)\b|"
    r"\b(?:i\s+(?:do\s+)?(?:confirm|agree|approve)|happy\s+with|fine\s+with|ok\s+with|"
    r"okay\s+with|my\s+(?:ok|okay|approval|go-ahead|blessing))\b",
    re.IGNORECASE,
)
_PARTS = re.compile(r"[\s,;:!.\-]+")
_CLAUSES = re.compile(r"(?<=[.!?;])\s+|\n+")


def _normalise(message: str) -> str:
    text = message.replace("\u2019", "'").replace("\u2018", "'")
    text = text.replace("\u2014", ",").replace("\u2013", ",").strip()
    text = re.sub(r"[\s]+", " ", text)
    return text.strip(' \t"*>-')


def _clauses(message: str) -> list[str]:
    return [_normalise(part) for part in _CLAUSES.split(message) if _normalise(part)]


# What may join a request to its subject: "file an issue for/about/to/on: X".
_SUBJECT_LEAD = re.compile(
    r"^[\s,:;-]*(?:(?:filed|opened|created|raised|logged)\b\s*)?"
    r"(?:(?:for|about|to|on|regarding|re|that|saying)\b)?[\s:,-]*",
    re.IGNORECASE,
)
# A question: it asks, whatever it is about ("should we file an issue?", "what does this PR
# change, and should we do what it asks"): a question mark, or an opening interrogative.
_INTERROGATIVE = re.compile(
    r"^(?:(?:ok|okay|so|and|hey|hi|then|now|also|but)\b[\s,]*)*"
    r"(?:what|why|how|which|who|whom|whose|where|when|should|shall|could|would|can|is|are|"
    r"was|were|do|does|did|will|has|have|had|may|might|must|isn't|aren't|doesn't|"
    r"didn't|shouldn't|wouldn't|couldn't)\b",
    re.IGNORECASE,
)


def filing_request(message: str) -> str | None:
    """The operator's explicit request for a new issue on this turn, as what it asks to
    file ("file an issue for the slow export" -> "the slow export"; "" when the request
    names nothing, as in "file this as an issue"); None when the message asks for none."""
    return _request(message, _ASK_TO_FILE)


def memory_request(message: str) -> str | None:
    """The operator's explicit request to remember something, as the fact ("remember that
    staging needs a VPN" -> "staging needs a VPN"; "" for "remember this"); else None."""
    return _request(message, _ASK_TO_REMEMBER)


def operator_asked_to_file(message: str) -> bool:
    """An explicit request for a new issue in the operator's own words, on this turn."""
    return filing_request(message) is not None


def operator_asked_to_remember(message: str) -> bool:
    return memory_request(message) is not None


def asks_a_question(message: str) -> bool:
    """Does the message ask something (rather than request a filing)? A polite request
    ("can you file an issue for X?") is a request too, so callers ask `filing_request`
    first."""
    return any(
        clause.endswith("?") or bool(_INTERROGATIVE.match(clause)) for clause in _clauses(message)
    )


# Asking whether to act: "should we ...", "do we need ...", "is it worth ...", "what should
# we do ...", "would you propose ...". Such a question is answered; it never leaves a
# proposal, whatever the model's trailer says (bot/chat/intents.py).
_WHETHER = re.compile(
    r"\b(?:should|shall|ought|must)\s+(?:we|i|you|they|someone|somebody|it|this|that)\b|"
    r"\b(?:do|does|would|will)\s+(?:we|i|you)\s+(?:need|want|think|suggest|recommend|propose)\b|"
    r"\b(?:is|was|would)\s+it\s+(?:be\s+)?(?:worth|wise|better|a\s+good\s+idea)\b|"
    r"\bwhat\s+(?:should|shall|do|would|could)\s+(?:we|i|you)\s+do\b|"
    r"\b(?:next\s+steps?|propose|suggest|recommend)\b",
    re.IGNORECASE,
)


def asks_whether_to_act(message: str) -> bool:
    """A question about whether to do something ("what does this PR change, and should we
    do what it asks?"): it gets an answer, never a proposal. An explicit request in the same
    message ("can you file an issue for X?") is a request, so callers ask that first."""
    return asks_a_question(message) and bool(_WHETHER.search(_normalise(message)))


def _request(message: str, pattern: re.Pattern[str]) -> str | None:
    for clause in _clauses(message):
        match = pattern.match(clause)
        if match and (not clause.endswith("?") or _polite(clause, pattern)):
            subject = _SUBJECT_LEAD.sub("", clause[match.end() :], count=1)
            return subject.strip().rstrip("?.!").strip()
    return None


def _polite(clause: str, pattern: re.Pattern[str]) -> bool:
    """ "Can you file an issue for X?" is a request, not a question about filing."""
    return bool(re.match(r"^(?:can|could|would|will)\s+you\b", clause, re.IGNORECASE)) and bool(
        pattern.match(clause)
    )


def reply_to_proposal(message: str) -> ProposalReply:
    """How the operator's message answers the proposal waiting on the session.

    A confirmation is a short message that says yes and nothing else ("yes", "go ahead",
    "ok, file it", "can you file it please?"); anything with a condition, a change or a
    negation ("yes but rename it", "not yet") is not one. A decline starts by saying no.
    """
    text = _normalise(message).rstrip(" .!")
    if not text:
        return ProposalReply.OTHER
    if _DECLINE.match(text):
        return ProposalReply.DECLINE
    if _NEGATION.search(text):
        return ProposalReply.OTHER
    question = text.endswith("?")
    bare = text.rstrip("?").strip()
    if question and not re.match(r"^(?:can|could|would|will)\s+you\b", bare, re.IGNORECASE):
        return ProposalReply.OTHER
    if not _CONFIRM.match(bare):
        return ProposalReply.OTHER
    return ProposalReply.CONFIRM if _has_assent(bare) else ProposalReply.OTHER


def _has_assent(text: str) -> bool:
    if _STRONG.search(text):
        return True
    # an assent phrase of several words ("go ahead", "sounds good") among the parts
    return bool(re.search(r"(?:^|[\s,;:!.\-])(?:" + _ASSENT + r")(?:$|[\s,;:!.\-])", text, re.I))


def confirms_filing(message: str) -> bool:
    """A confirmation that names the filing itself ("file it", "go ahead and open it"):
    with no proposal pending, it still asks to file what this turn's reply proposes."""
    if reply_to_proposal(message) is not ProposalReply.CONFIRM:
        return False
    return bool(re.search(r"\b" + _DO_VERB + r"\s+" + _THING, message, re.IGNORECASE))
