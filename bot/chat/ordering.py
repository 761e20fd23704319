"""The order a Chat turn's kept hits are shown in, in the prompt and the response
(docs/memory.md, Grounding a Chat turn, 4. Order).

Thread by thread: an issue, its comments, the pull requests that close it and their
comments are read together, threads by their best hit. A question about the state of
something ("is it fixed?", "can tenants do X now?") is answered by what was done, so there
the pull request that closes the thread's issue leads its thread.
"""

from __future__ import annotations

import re
from typing import Any

# Ordering key: cosine times the share of the round's query the hit contains, to this power.
# A chunk that matches one rare word of the question strongly should not lead one that
# matches most of it; at 1.0 the share punished chunks found through related terms (they
# match few of the question's own words), at 0.5 it still breaks near-ties. Measured on the
# labelled set (bench/README.md): 1.0 and 0.25 each kept 2 answers fewer than 0.5.
COORDINATION = 0.5

# A question about the state of something: it opens with an auxiliary verb ("is", "did",
# "can"...) or names a state ("fixed", "merged", "now", "still"...).
AUXILIARIES = frozenset("is are was were did does do can has have will".split())
STATE_WORDS = frozenset(
    "now yet still anymore fixed resolved closed merged shipped released done available"
    " implemented patched landed complete completed gone".split()
)
_WORDS = re.compile(r"[a-z0-9']+")


def asks_state(question: str) -> bool:
    """Does the question ask whether something was done (a status question)?"""
    words = _WORDS.findall(question.lower())
    return bool(words) and (words[0] in AUXILIARIES or not STATE_WORDS.isdisjoint(words))


def ordered(hits: list[dict[str, Any]], *, state: bool = False) -> list[dict[str, Any]]:
    """The focus context first (the subject of a Discuss session), then thread by thread:
    threads with a strong hit (one that matches the question itself well) before threads
    found only loosely, each by its best hit's rank. In a thread: its hits by rank, then the
    context that came with them (the issue and PR of a followed link); with `state`, the
    pull request that closes the thread's issue first."""
    first = [h for h in hits if h["round"] == "focus" and h["strength"] == "context"]
    focus = {thread_key(h) for h in first}
    groups: dict[tuple[str, int], list[dict[str, Any]]] = {}
    for hit in hits:
        if hit not in first:
            groups.setdefault(thread_key(hit), []).append(hit)

    def best(group: list[dict[str, Any]]) -> tuple[bool, float]:
        if thread_key(group[0]) in focus:
            return True, 2.0  # the focused thread's own hits come right after its context
        strong = any(h["strength"] == "strong" for h in group)
        return strong, max((rank(h) for h in group if h["strength"] != "context"), default=-1.0)

    out = list(first)
    for group in sorted(groups.values(), key=best, reverse=True):
        key = thread_key(group[0])
        semantic = sorted((h for h in group if h["strength"] != "context"), key=lambda h: -rank(h))
        context = [h for h in group if h["strength"] == "context"]
        members = [*semantic, *context]
        if state:
            done = [h for h in members if _closes(h, key)]
            members = done + [h for h in members if h not in done]
        out += members
    return out


def rank(hit: dict[str, Any]) -> float:
    """The cosine times the share of the query the hit contains, to the power COORDINATION."""
    return float(hit["score"]) * float(hit.get("matched", 1.0)) ** COORDINATION


def thread_key(hit: dict[str, Any]) -> tuple[str, int]:
    """The thread a hit belongs to: the issue a pull request (or a comment on it) closes,
    else its own issue or PR number, else the chunk alone. `thread` is set by the grounder
    from the index's closing references (Memory.closes)."""
    if hit.get("thread"):
        return ("issue", int(hit["thread"]))
    links = hit.get("links") or []
    if hit["source"] == "pull_request" and links:
        return ("issue", min(links))
    if hit.get("issue"):
        return ("issue", int(hit["issue"]))
    return ("chunk", int(hit["id"]))


def _closes(hit: dict[str, Any], key: tuple[str, int]) -> bool:
    closed = hit.get("links") or []
    return hit["source"] == "pull_request" and key[0] == "issue" and key[1] in closed
