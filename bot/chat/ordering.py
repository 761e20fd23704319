"""The order a Chat turn's kept hits are shown in, in the prompt and the response
(docs/memory.md, Grounding a Chat turn, 4. Order).

Thread by thread: an issue, its comments, the pull requests that close it and their
comments are read together, threads by their best hit. A question about the state of
something ("is it fixed?", "can tenants do X now?") is answered by what was done, so there
the pull request that closes the thread's issue leads its thread.
"""

from __future__ import annotations

import re

from msgspec import UnsetType

from bot.contracts.hits import RetrievedHit, RoundQuery, Strength

# Ordering key: cosine times the share of the round's query the hit contains, to this power.
# A chunk that matches one rare word of the question strongly should not lead one that
# matches most of it; at 1.0 the share punished chunks found through related terms (they
# match few of the question's own words). Measured on the labelled set (docs/memory.md,
# Order): 1.0 375, 0.5 378, 0.25 379 of 396; anywhere from 0.25 to 0.6 is within one answer.
COORDINATION = 0.5

# Each further chunk of a thread ranks as the thread's best hit times this, to the power of
# its place in the thread. 1.0 keeps threads whole (an issue, its comments and its PR read
# together: the answer to a status or why question is often the thread's third chunk);
# below it, a second thread whose best hit is nearly as good comes in between. Measured on
# the labelled set (docs/memory.md, Order): 1.0 376, 0.95 378, 0.9 377, 0.8 375 of 396.
THREAD_DECAY = 0.95

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


def ordered(hits: list[RetrievedHit], *, state: bool = False) -> list[RetrievedHit]:
    """The focus context first (the subject of a Discuss session), then thread by thread:
    threads with a strong hit (one that matches the question itself well) before threads
    found only loosely, each by its best hit's rank. In a thread: its hits by rank, then the
    context that came with them (the issue and PR of a followed link); with `state`, the
    pull request that closes the thread's issue first. A thread's n-th chunk ranks as its
    best times THREAD_DECAY**n, so a thread stays together unless another thread of the
    same tier has a best hit nearly as good (a soft penalty, not one chunk per thread)."""
    first = [h for h in hits if h.round == RoundQuery.FOCUS and h.is_context]
    focus = {thread_key(h) for h in first}
    groups: dict[tuple[str, int], list[RetrievedHit]] = {}
    for hit in hits:
        if hit not in first:
            groups.setdefault(thread_key(hit), []).append(hit)
    placed: list[tuple[tuple[int, float, int], RetrievedHit]] = []
    for key, group in groups.items():
        if key in focus:  # the focused thread's own hits come right after its context
            tier, best = 2, 1.0
        else:
            tier = int(any(h.strength == Strength.STRONG for h in group))
            best = max((rank(h) for h in group if not h.is_context), default=0.0)
        for n, hit in enumerate(_in_thread(group, key, state=state)):
            placed.append(((-tier, -best * THREAD_DECAY**n, len(placed)), hit))
    placed.sort(key=lambda item: item[0])
    return [*first, *(hit for _, hit in placed)]


def _in_thread(
    group: list[RetrievedHit], key: tuple[str, int], *, state: bool
) -> list[RetrievedHit]:
    semantic = sorted((h for h in group if not h.is_context), key=lambda h: -rank(h))
    members = [*semantic, *(h for h in group if h.is_context)]
    if state:
        done = [h for h in members if _closes(h, key)]
        members = done + [h for h in members if h not in done]
    return members


def rank(hit: RetrievedHit) -> float:
    """The cosine times the share of the query the hit contains, to the power COORDINATION."""
    matched = 1.0 if isinstance(hit.matched, UnsetType) else hit.matched
    share: float = matched**COORDINATION
    return (hit.score or 0.0) * share


def thread_key(hit: RetrievedHit) -> tuple[str, int]:
    """The thread a hit belongs to: the issue a pull request (or a comment on it) closes,
    else its own issue or PR number, else the chunk alone. `thread` is set by the grounder
    from the index's closing references (Memory.closes)."""
    if not isinstance(hit.thread, UnsetType) and hit.thread:
        return ("issue", hit.thread)
    if hit.source == "pull_request" and hit.links:
        return ("issue", min(hit.links))
    if hit.issue:
        return ("issue", hit.issue)
    return ("chunk", hit.id)


def _closes(hit: RetrievedHit, key: tuple[str, int]) -> bool:
    return hit.source == "pull_request" and key[0] == "issue" and key[1] in hit.links
