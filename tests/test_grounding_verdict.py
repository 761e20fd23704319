"""The answerability verdict (issue 31): each turn decides whether session memory answers the
question; when it does not, the reply says so first, the closest chunks are listed apart as
"not an answer", the model's prompt gets the same verdict, and the response, the turn's
metadata and the TUI's `retrieve N hits` row carry it."""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np
import pytest

from bot.chat import verdict_model
from bot.chat.answerability import answer_score, decide, thread_agreement, verdict_features
from bot.chat.grounding import Answerability, Verdict
from bot.config import Settings
from bot.contracts.hits import RetrievedHit, RoundQuery
from bot.contracts.turn_meta import AnswerabilityMeta
from bot.dialogue import NOTHING_ANSWERS
from memory import ChunkIn
from tests.conftest import ApiClient, read_sse
from tests.fakes.runtimes import ScriptedRuntime, reply
from tui_client.transcript import hits_title

REPO = "steelframe-dev/sandbox"
CHUNKS = [
    ChunkIn(
        "#12 close_day job double-posts fees when it is retried\n\nThe nightly close_day RQ"
        " job posts card fees to the ledger; a retry after a timeout posts them again.",
        "issue",
        REPO,
        issue=12,
    ),
    ChunkIn(
        "@dana on #12:\nKey the fee posting on tenant and business date with a unique"
        " constraint instead of raising the job timeout.",
        "comment",
        REPO,
        issue=12,
    ),
    ChunkIn(
        "PR #31 close_day: idempotent fee posting\n\nPosts fees with ON CONFLICT DO NOTHING."
        " Fixes #12",
        "pull_request",
        REPO,
        issue=31,
    ),
    ChunkIn(
        "#14 Trial balance report is slow\n\nThe report scans every journal line; the"
        " cluster's proxy cuts it at 30 s.",
        "issue",
        REPO,
        issue=14,
    ),
    ChunkIn("Deploys run from the release job on the main cluster.", "note", REPO),
    ChunkIn("The staging database is restored from last night's backup.", "note", REPO),
]
NO_ANSWER = "Which Kubernetes version does the Loki logging cluster run?"
ANSWERABLE = "Why does close_day post the fees twice when it is retried?"


async def _api(api_factory: Any, settings: Settings, **overrides: Any) -> ApiClient:
    api: ApiClient = await api_factory(settings, **overrides)
    assert api.services.memory is not None
    api.services.memory.add(CHUNKS)
    return api


async def test_memory_with_no_answer_says_so_first_and_lists_the_closest_apart(
    api_factory: Any, settings: Settings
) -> None:
    api = await _api(api_factory, settings)
    response = await api.post("/api/operator/chat/stream", json={"message": NO_ANSWER})
    frames = await read_sse(response)
    done = frames[-1]["response"]
    assert done["memory_verdict"] == "nothing"
    assert done["reply"].startswith(NOTHING_ANSWERS)
    if done["retrieve_hits"]:
        assert "Closest in session memory, not an answer:" in done["reply"]
        assert "From session memory:" not in done["reply"]
    assert frames[-1]["response"]["history"][-1]["meta"]["memory_verdict"] == "nothing"
    evidence = done["history"][-1]["meta"]["answerability"]
    assert evidence["verdict"] == "nothing" and "kubernet" in evidence["missing"]


async def test_memory_that_answers_answers(api_factory: Any, settings: Settings) -> None:
    api = await _api(api_factory, settings)
    done = await (await api.post("/api/operator/chat", json={"message": ANSWERABLE})).json()
    assert done["memory_verdict"] == "answers"
    assert not done["reply"].startswith(NOTHING_ANSWERS)
    assert "From session memory:" in done["reply"] and "#12" in done["reply"]
    evidence = done["history"][-1]["meta"]["answerability"]
    assert evidence["coverage"] >= 0.55 and evidence["verdict"] == "answers"
    assert evidence["score"] >= verdict_model.THRESHOLD
    # the thread's evidence beside it: the question's terms #12's thread holds whole, the
    # rounds that found that thread, and a "why" question's thread holds its discussion
    assert 3 <= evidence["held"] <= evidence["terms"]
    assert evidence["agreeing_rounds"] >= 1 and evidence["thread_fits"] is True


def _evidence(coverage: float, **more: Any) -> Answerability:
    fields = {"best": 0.3, "missing_peak": 0.1, "unknown_share": 0.0, "terms": 5, **more}
    return Answerability(Verdict.NOTHING, "", coverage=coverage, **fields)


def test_the_calibrated_verdict_answers_when_the_thread_holds_the_question() -> None:
    held = decide(_evidence(1.0, missing_peak=0.0))
    assert held.verdict is Verdict.ANSWERS and held.score >= verdict_model.THRESHOLD
    lacking = decide(_evidence(0.1, missing_peak=0.6, unknown_share=0.6))
    assert lacking.verdict is Verdict.NOTHING and "missing" in lacking.reason
    # more of the question held never lowers the score
    scores = [answer_score(_evidence(c / 10)) for c in range(11)]
    assert scores == sorted(scores)


def test_a_question_about_the_focused_thread_answers_whatever_the_score() -> None:
    judged = decide(_evidence(0.0, about_focus=True), focus=7)
    assert judged.verdict is Verdict.ANSWERS and "#7" in judged.reason


def test_the_committed_model_says_how_it_was_fitted_and_on_what() -> None:
    doc = verdict_model.__doc__ or ""
    assert "--fit-verdict" in doc and "tuning part" in doc and "Fitted by" in doc
    assert len(verdict_features(_evidence(0.5))) == len(verdict_model.COEF)
    assert len(verdict_model.MEAN) == len(verdict_model.SCALE) == len(verdict_model.FEATURES)
    assert 0.0 < verdict_model.THRESHOLD < 1.0


async def test_the_model_gets_the_same_verdict_and_an_honest_reply_needs_no_citation(
    api_factory: Any, settings: Settings
) -> None:
    scripted = ScriptedRuntime(drafts=[reply(f"{NOTHING_ANSWERS}. Nothing about Loki.")])
    api = await _api(api_factory, settings, runtimes=lambda agent: scripted)
    done = await (await api.post("/api/operator/chat", json={"message": NO_ANSWER})).json()
    assert done["memory_verdict"] == "nothing"
    request = scripted.requests[0]
    assert request.facts.memory_answers is False
    assert f"{NOTHING_ANSWERS}:" in request.system
    assert len(scripted.requests) == 1  # saying memory has nothing is not an uncited draft


async def test_a_turn_with_an_answer_tells_the_model_nothing_of_the_kind(
    api_factory: Any, settings: Settings
) -> None:
    scripted = ScriptedRuntime(drafts=[reply("Per #12, a retry posts the fees again.")])
    api = await _api(api_factory, settings, runtimes=lambda agent: scripted)
    await api.post("/api/operator/chat", json={"message": ANSWERABLE})
    request = scripted.requests[0]
    assert request.facts.memory_answers is True
    assert NOTHING_ANSWERS not in request.system


def test_the_tui_row_says_the_hits_are_the_closest_when_nothing_answers() -> None:
    assert hits_title(3, 3, "nothing") == (
        "retrieve 3 hits · nothing answers this: closest, not an answer"
    )
    assert hits_title(3, 3, "answers") == "retrieve 3 hits"
    assert hits_title(0, 2, "nothing").startswith("retrieve 0 hits · (no semantic hits)")


async def test_a_verdict_that_cannot_be_reached_never_fails_the_turn(
    api_factory: Any, settings: Settings, monkeypatch: pytest.MonkeyPatch
) -> None:
    api = await _api(api_factory, settings)
    assert api.services.memory is not None

    def broken(*args: Any, **kwargs: Any) -> Any:
        raise OSError("disk gone")

    monkeypatch.setattr(api.services.memory, "coverage", broken)
    response = await api.post("/api/operator/chat", json={"message": ANSWERABLE})
    assert response.status == 200
    done = await response.json()
    assert done["memory_verdict"] == "unavailable" and done["retrieve_hits"] >= 1
    assert not done["reply"].startswith(NOTHING_ANSWERS)


def test_the_stored_evidence_names_every_field_of_the_verdict_in_order() -> None:
    evidence = Answerability(Verdict.NOTHING, "thin", missing=("ledger",), terms=3)
    stored = evidence.to_json()
    assert list(stored) == [f.name for f in dataclasses.fields(Answerability)]
    assert list(stored) == list(AnswerabilityMeta.__annotations__)
    assert stored["verdict"] == "nothing" and stored["missing"] == ["ledger"]


def _hit(id: int, source: str, issue: int, found: RoundQuery) -> RetrievedHit:
    return RetrievedHit(
        id, source, 0.4, 1.0, REPO, issue, None, (), None, (), "", "", found, thread=issue
    )


def test_the_rounds_that_agree_are_those_that_found_the_best_hits_thread() -> None:
    lead = _hit(1, "issue", 12, RoundQuery.MESSAGE)
    hits = [
        lead,
        _hit(2, "comment", 12, RoundQuery.LINKS),
        _hit(3, "pull_request", 14, RoundQuery.EXPANSION),
    ]
    rounds, fits = thread_agreement("Which PR fixed the double posting?", hits, lead)
    assert rounds == 2 and fits is False  # the PR that was found is another thread's
    hits.append(_hit(4, "pull_request", 12, RoundQuery.EXPANSION))
    assert thread_agreement("Which PR fixed the double posting?", hits, lead) == (3, True)


def test_the_choice_of_features_never_lets_more_no_answer_questions_through() -> None:
    """bench/verdict_select.py's objective, on made-up evidence: among the candidates that
    let through no more held-out no-answer questions than the committed model, the fewest
    answerable ones told "nothing"."""
    from bench.verdict_fit import CANDIDATES, Rows
    from bench.verdict_select import COMMITTED, candidates, choose

    random = np.random.default_rng(0)
    answerable = np.arange(60) % 6 != 0
    x = random.normal(size=(60, len(CANDIDATES))) + answerable[:, None] * 0.8
    none = np.zeros(60)
    rows = Rows(x, answerable, np.zeros(60, dtype=bool), none, none, np.full(60, "wren"))
    among = [COMMITTED, *candidates()[-4:]]
    chosen, table = choose(rows, np.arange(60), repeats=1, among=among)
    assert COMMITTED in candidates() and chosen in among
    assert table[chosen].let_through <= table[COMMITTED].let_through
    assert table[chosen].told_nothing <= table[COMMITTED].told_nothing


def test_the_pooled_fit_keeps_both_sets_in_every_fold_and_its_budget() -> None:
    """bench/verdict_fit.py on two made-up tuning sets: every held-out fold holds both sets'
    no-answer questions, and the "budget" threshold lets through, on the folds it was set
    on, at most its share of the no-answer questions."""
    from bench.verdict_fit import (
        BUDGET_REPEATS,
        BUDGET_SHARE,
        CANDIDATES,
        FEATURES,
        Rows,
        columns,
        fit,
        stratified,
    )

    random = np.random.default_rng(1)
    answerable = np.arange(120) % 6 != 0
    x = random.normal(size=(120, len(CANDIDATES))) + answerable[:, None] * 0.8
    none = np.zeros(120)
    sets = np.where(np.arange(120) < 60, "tallyho-tuning", "wren")
    rows = Rows(x, answerable, np.zeros(120, dtype=bool), none, none, sets)
    everything = np.arange(120)
    for _, test in stratified(rows, everything, 1):
        held = set(rows.strata[test].tolist())
        assert held == {0, 1, 2, 3}  # each set's no-answer and answerable questions
    assert rows.weights(everything[:90], "set").sum() == 90  # the same total, set by set
    limit = fit(rows, everything, threshold_rule="budget").threshold
    let_through = 0
    for train, test in stratified(rows, everything, BUDGET_REPEATS):
        draft = fit(rows, train, threshold_rule="midway")
        scores = draft.scores(rows.x[np.ix_(test, columns(FEATURES))])
        let_through += int((scores[~answerable[test]] >= limit).sum())
    assert let_through <= BUDGET_SHARE * (~answerable).sum() * BUDGET_REPEATS


def test_known_coverage_counts_only_the_part_of_the_question_memory_knows() -> None:
    """A question asked partly in words no chunk contains is not counted short twice: its
    known coverage is the coverage over the known part (bench/HISTORY.md, g31 helper)."""
    from bot.chat.answerability import known_coverage

    evidence = Answerability(Verdict.NOTHING, "", coverage=0.4, unknown_share=0.5)
    assert known_coverage(evidence) == pytest.approx(0.8)
    assert known_coverage(dataclasses.replace(evidence, unknown_share=1.0)) == 0.0
    # a term memory lacks can still be held through a related word: at most 1
    assert known_coverage(dataclasses.replace(evidence, coverage=0.6)) == 1.0
    assert verdict_features(evidence, ("known_coverage",)) == pytest.approx((0.8,))


def test_the_transfer_judgement_fits_on_one_domain_and_counts_on_the_other() -> None:
    """bench/verdict_transfer.py on two made-up tuning sets: a recipe fitted on one set is
    counted on the other set's questions only, and the pick never takes a candidate that
    lets more no-answer questions through than the reference in either direction."""
    from bench.verdict_fit import CANDIDATES, Rows
    from bench.verdict_pool import Count
    from bench.verdict_transfer import RECIPES, REFERENCE, Judged, across, pick

    random = np.random.default_rng(2)
    answerable = np.arange(120) % 6 != 0
    x = random.normal(size=(120, len(CANDIDATES))) + answerable[:, None] * 0.8
    none = np.zeros(120)
    sets = np.where(np.arange(120) < 50, "tallyho-tuning", "wren")
    rows = Rows(x, answerable, np.zeros(120, dtype=bool), none, none, sets)
    counted = across(rows, REFERENCE)
    assert counted["T->W"].no_answer + counted["T->W"].answerable == 70  # Wren's questions
    assert counted["W->T"].no_answer + counted["W->T"].answerable == 50

    def judged(let: float, told: float) -> Judged:
        one = Count(let, 10, told, 50)
        return Judged({"T->W": one, "W->T": one}, Count(let, 20, told, 100))

    table = {recipe: judged(1, 40) for recipe in RECIPES}
    assert pick(table) is None  # no candidate tells fewer "nothing"
    table[RECIPES[1]] = judged(2, 10)  # fewer "nothing", but lets more through
    table[RECIPES[2]] = judged(1, 30)
    assert pick(table) is RECIPES[2]
