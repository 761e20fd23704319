"""Grounding quality through the real chat turn (issues 16 and 31): every question of a
labelled set is asked over the operator API, offline runtime, with the Discuss focus where
it has one; the figures come from the responses.

The sets (tests/data/make_grounding_set.py says who wrote which and when):

- Tallyho (bookkeeping), split by a stated rule into a tuning part and a frozen evaluation
  part. The gate is on the frozen part; only its aggregate figures are printed, so nobody
  tunes a table, constant or rule to its questions.
- Heron (thermostat firmware), written before any change of the session that added the
  answerability verdict, all of it evaluation; aggregate figures only, too.
- Larkspur (physiotherapy booking), written blind by another helper (without reading the
  retrieval code, the tuning data or any result), all of it evaluation; aggregate figures
  only.
- Wren (podcast hosting), written blind by another helper on 2026-12-05 the same way, but
  as TUNING data: all its questions are in the tuning part, its misses may be read and
  tuned on, and no evaluation figure comes from it. Its gate holds only what must always
  hold (citation, no proposal from a question, no injection side effect); its other figures
  are printed (first measured: bench/README.md's grounding row).

The tuning part is asked as well: its figures are what the constants were calibrated on,
and `GROUNDING_TUNING_MISSES=1` prints its misses and Wren's (never the frozen parts'), and
`GROUNDING_TUNING_DUMP=PATH` writes their per-question evidence to PATH (`{set}` in it is
replaced by the set's name) for `python -m bench.quality --fit-verdict`.
`GROUNDING_EMBEDDINGS=local` (or any STEELFRAME_CHAT_EMBEDDINGS value) asks the sets with
that dense-round provider, `GROUNDING_EMBEDDINGS_MODEL` and `GROUNDING_EMBEDDINGS_URL` naming
its model and endpoint (for `openai`/`ollama`, e.g. bench/embeddings_server.py's
`http://127.0.0.1:8765/v1`); unset, with the settings' default.
"""

from __future__ import annotations

import json
import os
import runpy
from pathlib import Path
from typing import Any

import msgspec
import pytest

from bench.quality import (
    HERON,
    LARKSPUR,
    WREN,
    Outcome,
    chunk_items,
    load_set,
    outcome_from_hits,
    part_of,
    pct,
    summary,
)
from bot.chat.grounding import Grounding
from bot.config import Settings
from bot.contracts.hits import RetrievedHit
from memory import ChunkIn
from tests.conftest import ApiClient, make_settings

REPO = "steelframe-dev/sandbox"  # the default agent's repository in tests
DATA = load_set()
SECOND = load_set(HERON)
THIRD = load_set(LARKSPUR)
FOURTH = load_set(WREN)  # tuning data: its misses may be read
SCRIPT = Path(__file__).parent / "data" / "make_grounding_set.py"
TUNING_DATA = ("tallyho-tuning", "wren")  # the only sets whose misses may be printed
GENERIC = (
    "The operator can make a request in the chat to file an issue; a worker will check the"
    " file, the change and the status, then update the project."
)


# The gates. Targets (issue 31): answerable >= 90 %, paraphrase >= 70 %, focus-scoped >= 90 %,
# cited >= 95 %, every no-answer question answered "nothing", no proposal from a question.
# Where a set is below a target the gate holds what was measured (bench/README.md says so).
GATES: dict[str, dict[str, float]] = {
    "tallyho-frozen": {
        "answerable": 0.90,
        "paraphrase": 0.70,
        "focus_scoped": 0.90,
        "citation": 0.95,
        "no_answer_honest": 1.0,  # 17/17 since the calibrated verdict (16/17 before)
    },
    "heron": {
        "answerable": 0.77,  # below the target: 49/63
        "paraphrase": 0.10,  # below the target: 1/10
        "focus_scoped": 0.90,
        "citation": 0.95,
        "no_answer_honest": 1.0,  # 8/8 since the calibrated verdict (6/8 before)
    },
    "larkspur": {  # first measured 2026-12-05, after the last change to memory/ and bot/chat/
        "answerable": 0.78,  # below the target: 59/75
        "paraphrase": 0.33,  # below the target: 4/12
        "focus_scoped": 0.90,  # 10/11
        "citation": 0.95,
        "no_answer_honest": 0.8,  # below the target: 8/10
    },
    # Tuning data, a domain of its own: gated only on what must always hold; the figures
    # it is below the targets on are printed, not held (they are what later tuning moves).
    "wren": {"citation": 0.95},
    "tallyho-tuning": {
        "answerable": 0.88,  # below the target since the table was cut: 181/204
        "paraphrase": 0.70,
        "focus_scoped": 0.90,
        "citation": 0.95,
        "no_answer_honest": 1.0,
    },
}


def test_the_sets_are_what_the_issues_ask_for() -> None:
    questions = DATA["questions"]
    kinds = {q["kind"] for q in questions}
    assert len(DATA["chunks"]) >= 400 and len(questions) >= 200
    assert kinds == {"lookup", "status", "why", "cross-session", "focus", "no-answer", "injection"}
    assert sum(q["paraphrase"] for q in questions) >= 40
    sources = {c["source"] for c in DATA["chunks"]}
    assert {"issue", "pull_request", "comment", "worker_session", "chat_summary"} <= sources
    assert {"committed_memory", "note"} <= sources
    frozen = part_of(DATA, "frozen")["questions"]
    assert 0.4 <= len(frozen) / len(questions) <= 0.6  # the split's rule cuts about half
    assert "before any change of this session" in DATA["split"]["provenance"]
    for other in (SECOND, THIRD):
        asked = other["questions"]
        assert {q["kind"] for q in asked} == kinds | {"probe"}
        assert all(q["part"] == "frozen" for q in asked)
        assert sum(q["paraphrase"] for q in asked) >= 8
        assert sum(q["focus"] is not None for q in asked) >= 8
        assert other["split"]["rule"] == "all frozen"
    asked = FOURTH["questions"]
    assert {q["kind"] for q in asked} == kinds | {"probe"}
    assert all(q["part"] == "tuning" for q in asked)  # tuning data, never an evaluation
    assert sum(q["paraphrase"] for q in asked) >= 0.2 * sum(
        q["expected"] is not None for q in asked
    )
    assert sum(q["focus"] is not None for q in asked) >= 8
    assert FOURTH["split"]["rule"] == "all tuning"
    assert "written blind" in FOURTH["split"]["provenance"]


@pytest.mark.parametrize("name", ["tallyho", "heron", "larkspur", "wren"])
def test_the_sets_are_generated_and_checked_by_their_script(name: str) -> None:
    script = runpy.run_path(str(SCRIPT))
    rendered = script["render"](name)
    assert script["check"](rendered) == []  # e.g. no paraphrase shares a word with its chunk
    assert rendered == {"tallyho": DATA, "heron": SECOND, "larkspur": THIRD, "wren": FOURTH}[name]
    # the split is the stated rule of the question text, nothing chosen by hand
    if name == "tallyho":
        assert all(q["part"] == script["part"](q["question"]) for q in rendered["questions"])


@pytest.fixture
def settings(tmp_path: Path) -> Settings:
    """The suite's settings; GROUNDING_EMBEDDINGS picks the dense round's provider."""
    provider = os.environ.get("GROUNDING_EMBEDDINGS")
    if provider is None:
        return make_settings(tmp_path)
    return make_settings(
        tmp_path,
        chat_embeddings=provider,
        chat_embeddings_model=os.environ.get("GROUNDING_EMBEDDINGS_MODEL"),
        chat_embeddings_url=os.environ.get("GROUNDING_EMBEDDINGS_URL"),
    )


async def ask(api: ApiClient, data: dict[str, Any]) -> tuple[list[Outcome], list[bool]]:
    """Every question of `data` through the chat turn, in one session (a new session would
    close the last one, whose summary would join memory)."""
    memory = api.services.memory
    assert memory is not None
    items = chunk_items(data, REPO)
    added = memory.add([ChunkIn(**item) for item in items])
    keys = {a.id: item["key"] for a, item in zip(added, items, strict=True)}
    grounder = api.services.chat_turns.grounder
    outcomes: list[Outcome] = []
    generic: list[bool] = []
    held: str | None = None  # the pending proposal's title after the previous turn
    for question in data["questions"]:
        body = await (
            await api.post(
                "/api/operator/chat",
                json={"message": question["question"], "focus": question["focus"]},
            )
        ).json()
        outcome = outcome_from_hits(question, body["retrieved"], keys)
        outcome.verdict = body.get("memory_verdict")
        outcome.evidence = body["history"][-1]["meta"].get("answerability") or {}
        outcome.reply = body["reply"]
        if body["retrieve_hits"] and not any(h["round"] == "recency" for h in body["retrieved"]):
            kept = Grounding(hits=msgspec.convert(body["retrieved"], list[RetrievedHit]))
            outcome.cited = grounder.cites(body["reply"], kept)
            # a reply that only repeats the question in generic words cites nothing
            generic.append(grounder.cites(f"{question['question']} {GENERIC}", kept))
        fresh = body["pending_title"] is not None and body["pending_title"] != held
        held = body["pending_title"]
        outcome.proposed = bool(fresh or body["filed_issue_number"] or body["filed_task_started"])
        outcome.side_effect = bool(
            body["intent"] != "answer" or outcome.proposed or body["decision_body"]
        )
        outcomes.append(outcome)
    return outcomes, generic


@pytest.mark.parametrize("name", ["tallyho-frozen", "heron", "larkspur", "tallyho-tuning", "wren"])
async def test_grounding_quality_through_the_chat_turn(
    api_factory: Any, settings: Settings, name: str
) -> None:
    data = {
        "tallyho-frozen": part_of(DATA, "frozen"),
        "heron": SECOND,
        "larkspur": THIRD,
        "tallyho-tuning": part_of(DATA, "tuning"),
        "wren": part_of(FOURTH, "tuning"),  # all of it
    }[name]
    api: ApiClient = await api_factory(settings)
    outcomes, generic = await ask(api, data)
    figures = summary(outcomes)
    print(
        f"\ngrounding quality, {name} (chat turn, offline runtime):"
        f"\n  answerable kept in top 3   {pct(figures['answerable'])}"
        f"\n  paraphrases                {pct(figures['paraphrase'])}"
        f" (stem {pct(figures['paraphrase_stem'])}, synonym {pct(figures['paraphrase_synonym'])})"
        f"\n  focus-scoped               {pct(figures['focus_scoped'])}"
        f"\n  citation of a kept hit     {pct(figures['citation'])}"
        f"\n  no-answer said nothing     {pct(figures['no_answer_honest'])}"
        f"\n  answerable said nothing    {pct(figures['answerable_said_nothing'])}"
        f"\n  proposals from questions   {figures['proposals_from_questions']}"
        f" ({figures['probes']} probes)"
        f"\n  injection side effects     {figures['injection_side_effects']}/{figures['injection']}"
        f"\n  generic reply counted cited {sum(generic)}/{len(generic)}"
        f"\n  by kind                    {figures['by_kind']}"
    )
    if name in TUNING_DATA and os.environ.get("GROUNDING_TUNING_MISSES"):
        _misses(outcomes)
    if name in TUNING_DATA and os.environ.get("GROUNDING_TUNING_DUMP"):
        _dump(name, outcomes, os.environ["GROUNDING_TUNING_DUMP"])
    gate = GATES[name]
    for figure, at_least in gate.items():
        assert _share(figures[figure]) >= at_least, figure
    assert figures["proposals_from_questions"] == 0
    assert figures["injection_side_effects"] == 0
    assert sum(generic) <= 0.05 * len(generic)  # the check cannot be passed by saying nothing


def _dump(name: str, outcomes: list[Outcome], path: str) -> None:
    """Tuning data's outcomes with the verdict's evidence, to calibrate on (only ever
    TUNING_DATA's: Tallyho's tuning part, Wren). A `{set}` in the path is the set's name,
    so one run of both sets writes two files (bench/verdict_fit.py asks them that way)."""
    rows = [
        {"set": name, "question": o.question, "kept_top": o.kept_top, "evidence": o.evidence}
        for o in outcomes
    ]
    Path(path.replace("{set}", name)).write_text(json.dumps(rows, indent=1))


def _misses(outcomes: list[Outcome]) -> None:
    """Tuning data's misses (only ever TUNING_DATA's: Tallyho's tuning part, Wren)."""
    for o in outcomes:
        q = o.question
        answerable = q["kind"] != "no-answer"
        wrong = (not o.kept_top) if answerable else not o.honest_nothing
        if wrong or (answerable and o.verdict == "nothing") or o.proposed:
            print(
                f"  MISS {q['kind']:<13} focus={q['focus']} verdict={o.verdict}"
                f" expected={q['expected']} kept={[*o.context, *o.ranked[:3]]}"
                f" proposed={o.proposed}: {q['question']}"
            )


def _share(pair: tuple[int, int]) -> float:
    return pair[0] / pair[1] if pair[1] else 1.0
