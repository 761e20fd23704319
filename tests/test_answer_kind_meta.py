"""`kind_missing` where the operator reads it: the kind of answer a question asks for that
the covering thread lacks (bot.chat.answer_kind) is in the stored turn's metadata and named
in the verdict's reason, whatever the verdict; it moves neither the verdict nor the score
(not scored: docs/memory.md, "The kind of answer asked for: measured, not kept")."""

from __future__ import annotations

import dataclasses
from typing import Any

from bot.chat.answerability import decide
from bot.chat.grounding import Answerability, Verdict
from bot.config import Settings
from tests.test_grounding_verdict import NO_ANSWER, _api

LACKS = "the question asks for a {} the covering thread lacks"


def _evidence(coverage: float, **more: Any) -> Answerability:
    fields = {"best": 0.3, "missing_peak": 0.1, "unknown_share": 0.0, "terms": 5, **more}
    return Answerability(Verdict.NOTHING, "", coverage=coverage, **fields)


def test_the_reason_names_the_kind_missing_and_nothing_else_moves() -> None:
    for coverage in (1.0, 0.1):  # one verdict of each
        plain = decide(_evidence(coverage))
        lacking = decide(_evidence(coverage, kind_missing="count"))
        assert (lacking.verdict, lacking.score) == (plain.verdict, plain.score)
        assert lacking.reason == f"{plain.reason}; {LACKS.format('count')}"
        assert LACKS.format("count") not in plain.reason
    focused = decide(_evidence(0.0, about_focus=True, kind_missing="date"), focus=7)
    assert focused.verdict is Verdict.ANSWERS and "#7" in focused.reason
    assert focused.reason.endswith(LACKS.format("date"))
    assert dataclasses.replace(focused, reason="") == dataclasses.replace(
        decide(_evidence(0.0, about_focus=True), focus=7), reason="", kind_missing="date"
    )


async def test_a_turn_stores_the_kind_missing_in_its_metadata(
    api_factory: Any, settings: Settings
) -> None:
    """A "which ... version ...?" question of a memory whose covering thread holds none: the
    stored turn's metadata, as the operator's session view returns it, says so."""
    api = await _api(api_factory, settings)
    done = await (await api.post("/api/operator/chat", json={"message": NO_ANSWER})).json()
    session = await (await api.get(f"/api/operator/chat/session/{done['session']}")).json()
    evidence = session["messages"][-1]["meta"]["answerability"]
    assert evidence["kind_missing"] == "version"
    assert evidence["reason"].endswith(LACKS.format("version"))
