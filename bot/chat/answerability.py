"""Does session memory answer the turn's question? (docs/memory.md, Answerability.) The
verdict from the kept hits and the focus context; bot.chat.retrieval asks it once a turn."""

from __future__ import annotations

import math
import re
from dataclasses import replace

from msgspec import UnsetType

from bot.chat import verdict_model
from bot.chat.answer_kind import kind_missing
from bot.chat.grounding import (
    Answerability,
    Verdict,
)
from bot.chat.ordering import rank, thread_key
from bot.chat.retrieval_hits import RetrievalTurn, RoundQuery, record_of
from bot.contracts.hits import RetrievedHit
from memory import Memory
from memory.answerability import Cover

# The answerability verdict (docs/memory.md, Answerability): memory answers the question when
# the calibrated score over the evidence (a logistic regression fitted on the tuning part
# of the labelled set only, bot.chat.verdict_model) reaches its threshold...
# ...or when one thread holds this share of the model's search words (bot.chat.search_words).
# Not calibrated: the labelled sets are asked offline, with no model (docs/memory.md).
MODEL_WORDS_COVERAGE = 0.7
MARGIN_CAP = 10.0  # a best thread ten times the next one's rank leads no less at a hundred
VERDICT_TOP = 3  # the semantic hits, in prompt order, the coverage is measured over
# What a question's kind asks for, by its words: the source that answers it.
_KIND_SOURCES = (
    (re.compile(r"\b(?:worker|attempt|tried|try|session|agent)\b", re.I), {"worker_session"}),
    (re.compile(r"\b(?:fix|fixed|pr|pull|merged|change[sd]?)\b", re.I), {"pull_request"}),
    (re.compile(r"\b(?:decide[sd]?|decision|agree[sd]?|chose|choose)\b", re.I), {"comment"}),
    (re.compile(r"\b(?:why|how come|reason)\b", re.I), {"comment", "issue"}),
)


def fits_question(question: str, source: str) -> bool:
    """Is `source` what the question's kind asks for? (A question of no kind: any fits.)"""
    wanted = [sources for pattern, sources in _KIND_SOURCES if pattern.search(question)]
    return not wanted or any(source in sources for sources in wanted)


def margin_and_agreement(semantic: list[RetrievedHit], lead: RetrievedHit) -> tuple[float, bool]:
    """How far the best thread leads the next, and whether a later round found more of the
    leading thread."""
    threads: dict[tuple[str, int], float] = {}
    for hit in semantic:
        key = thread_key(hit)
        threads[key] = max(threads.get(key, 0.0), rank(hit))
    ranks = sorted(threads.values(), reverse=True)
    margin = ranks[0] / ranks[1] if len(ranks) > 1 and ranks[1] > 0 else float(bool(ranks))
    agreement = any(
        h.round != RoundQuery.MESSAGE and thread_key(h) == thread_key(lead) for h in semantic[1:]
    )
    return margin, agreement


def thread_agreement(
    question: str, hits: list[RetrievedHit], lead: RetrievedHit
) -> tuple[int, bool]:
    """Of the best hit's thread (its context included): how many rounds kept a hit of it
    (round 1, the links or focus round, the feedback or model round: do they find the same
    thread?), and whether one of its hits is the source the question's kind asks for."""
    thread = [h for h in hits if thread_key(h) == thread_key(lead)]
    rounds = {h.round for h in thread}
    return len(rounds), any(fits_question(question, h.source) for h in thread)


def judge(memory: Memory, turn: RetrievalTurn, hits: list[RetrievedHit]) -> Answerability:
    """Does memory answer the question? (docs/memory.md, Answerability.) The evidence:
    the share of the question's distinctive vocabulary the top hits and the focus
    context contain (memory.answerability), the best hit's cosine with the question,
    the margin of the best thread over the next, whether later rounds found more of
    the best thread, and whether the best hit's source is what the question asks for."""
    semantic = [h for h in hits if not h.is_context]
    if not hits:
        return Answerability(Verdict.NOTHING, "no hit")
    context = [h for h in hits if h.is_context]
    shown = [*semantic[:VERDICT_TOP], *context]
    union = coverage(memory, turn, shown)
    # ...and by thread: an answer is one thread that holds the question, not three
    # threads that each hold a word of it
    by_thread: dict[tuple[str, int], list[RetrievedHit]] = {}
    for hit in shown:
        by_thread.setdefault(thread_key(hit), []).append(hit)
    groups = list(by_thread.values())
    covers = [coverage(memory, turn, group) for group in groups]
    at = max(range(len(covers)), key=lambda i: covers[i].coverage)
    covered = covers[at]
    # The model's words (it saw the question, not memory) held by one thread: evidence
    # the thread answers in other words than the question's.
    by_words = model_words_coverage(memory, turn, by_thread)
    best = max((_question_score(h) for h in semantic), default=0.0)
    lead = semantic[0] if semantic else hits[0]
    margin, agreement = margin_and_agreement(semantic, lead)
    agreeing_rounds, thread_fits = thread_agreement(turn.query, hits, lead)
    # In a Discuss session a question in words memory knows ("is it done?", "what did
    # we decide here?") is about the focused thread, which is given: it answers.
    about_focus = turn.focus is not None and bool(context) and not union.unknown
    evidence = Answerability(
        Verdict.NOTHING,
        "",
        coverage=covered.coverage,
        spread=union.coverage,
        model_words=round(by_words, 4),
        best=round(best, 4),
        margin=round(margin, 3),
        agreement=agreement,
        fits=fits_question(turn.query, lead.source),
        missing=covered.missing[:8],
        unknown_share=covered.unknown_share,
        missing_peak=covered.missing_peak,
        terms=covered.terms,
        held=covered.held,
        agreeing_rounds=agreeing_rounds,
        thread_fits=thread_fits,
        kind_missing=kind_missing(turn.query, [h.text for h in groups[at]]),
        about_focus=about_focus,
    )
    return decide(evidence, focus=turn.focus)


def _question_score(hit: RetrievedHit) -> float:
    return 0.0 if isinstance(hit.question_score, UnsetType) else hit.question_score


def decide(evidence: Answerability, *, focus: int | None = None) -> Answerability:
    """The verdict on the evidence: the calibrated score (bot.chat.verdict_model) reaches
    its threshold, or the question is about the focused thread, or one thread holds most of
    the model's search words."""
    score = answer_score(evidence)
    by_words = evidence.model_words >= MODEL_WORDS_COVERAGE
    scored = score >= verdict_model.THRESHOLD
    answers = scored or evidence.about_focus or by_words
    if evidence.about_focus:
        reason = f"a question about the focused issue #{focus} in words memory knows"
    elif by_words and not scored:
        reason = f"one thread holds {evidence.model_words:.0%} of the model's search words"
    else:
        reason = (
            f"one thread of the top hits holds {evidence.coverage:.0%} of the question's"
            f" distinctive words, the best hit's cosine is {evidence.best:.2f}"
            + ("" if answers else f" (missing: {', '.join(evidence.missing[:4])})")
        )
    if evidence.kind_missing:  # not scored; the operator reading the verdict should see it
        reason += f"; the question asks for a {evidence.kind_missing} the covering thread lacks"
    return replace(
        evidence,
        verdict=Verdict.ANSWERS if answers else Verdict.NOTHING,
        reason=reason,
        score=round(score, 4),
    )


def verdict_features(
    evidence: Answerability, names: tuple[str, ...] = verdict_model.FEATURES
) -> tuple[float, ...]:
    """The evidence as the calibrated verdict's inputs, in `names` order (bench.quality
    --fit-verdict fits on the same function)."""
    values = {
        "coverage": evidence.coverage,
        "known_coverage": known_coverage(evidence),
        "spread": evidence.spread,
        "best": evidence.best,
        "log_margin": math.log(min(max(evidence.margin, 1.0), MARGIN_CAP)),
        "agreement": float(evidence.agreement),
        "fits": float(evidence.fits),
        "unknown_share": evidence.unknown_share,
        "missing_peak": evidence.missing_peak,
        "log_terms": math.log1p(evidence.terms),
        "log_held": math.log1p(evidence.held),
        "held_share": evidence.held / evidence.terms if evidence.terms else 0.0,
        "agreeing_rounds": float(evidence.agreeing_rounds),
        "thread_fits": float(evidence.thread_fits),
        "kind_missing": float(bool(evidence.kind_missing)),
    }
    return tuple(values[name] for name in names)


def known_coverage(evidence: Answerability) -> float:
    """The coverage over the part of the question memory knows: a question asked in words
    no chunk contains is not counted short twice (in `coverage` and in `unknown_share`)."""
    known = 1.0 - evidence.unknown_share
    return min(1.0, evidence.coverage / known) if known > 0 else 0.0


def answer_score(evidence: Answerability) -> float:
    """The calibrated probability that memory answers (logistic regression over the
    standardised features; coefficients in bot.chat.verdict_model)."""
    z = verdict_model.INTERCEPT + sum(
        c * (x - m) / s
        for c, x, m, s in zip(
            verdict_model.COEF,
            verdict_features(evidence),
            verdict_model.MEAN,
            verdict_model.SCALE,
            strict=True,
        )
    )
    return 1.0 / (1.0 + math.exp(-z))


def model_words_coverage(
    memory: Memory, turn: RetrievalTurn, by_thread: dict[tuple[str, int], list[RetrievedHit]]
) -> float:
    """The most of the model's search words one thread holds (0 when it proposed none)."""
    said = " ".join(turn.words)
    if not said:
        return 0.0
    return max(
        (memory.coverage(said, [record_of(h) for h in g]).coverage for g in by_thread.values()),
        default=0.0,
    )


def coverage(memory: Memory, turn: RetrievalTurn, hits: list[RetrievedHit]) -> Cover:
    return memory.coverage(
        turn.query, [record_of(h) for h in hits], repo=turn.agent.repo, related=turn.related
    )
