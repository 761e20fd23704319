"""The citation check of a Chat turn (docs/memory.md, Grounding a Chat turn, step 7): does a
draft cite what retrieval kept? A draft that cites nothing makes the grounder widen once."""

from __future__ import annotations

import re

from msgspec import UnsetType

from bot.chat.grounding import Grounding, Verdict
from bot.dialogue import NOTHING_ANSWERS
from memory import Memory


def cites(memory: Memory, reply: str, grounding: Grounding) -> bool:
    """Does the reply cite a kept hit: its #issue (or a #PR it closes), its session id
    (or its first 8 characters), or one of its rare terms (memory.feedback.rare_terms)?"""
    hits = grounding.kept_hits
    if not hits:
        return False
    if grounding.verdict is Verdict.NOTHING and reply.lstrip().startswith(NOTHING_ANSWERS):
        return True  # it says memory has no answer: nothing of the closest needs citing
    said = memory.terms(reply)
    for hit in hits:
        numbers = [hit.issue, *hit.links]
        if any(n and re.search(rf"#{n}(?!\d)", reply) for n in numbers):
            return True
        session = hit.session_id
        if session and (session in reply or (len(session) >= 8 and session[:8] in reply)):
            return True
        if not isinstance(hit.distinctive, UnsetType) and said.intersection(hit.distinctive):
            return True
    return False
