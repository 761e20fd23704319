"""Commands Steelframe answers from its own records ("what is #N waiting for?", "what is
left on #N?", "publish it") are answered by that record alone: the reply does not open with
"Session memory has nothing that answers this" and list the closest chunks before the
task's own answer (as the README's walkthrough showed), the model is told the record
answers instead of being handed memory to weigh, and a reply that cites no memory is not
drafted again. A question that is not a command is judged by memory as before."""

from __future__ import annotations

from typing import Any

from bot.chat.prompt import RECORD_NOTE
from bot.config import Settings
from bot.dialogue import NOTHING_ANSWERS
from tests.conftest import read_sse
from tests.fakes.runtimes import ScriptedRuntime, reply
from tests.test_grounding_verdict import _api

MEMORY_LINES = ("Closest in session memory", "From session memory", "Session memory")


async def test_a_record_command_is_answered_by_the_record_alone(
    api_factory: Any, settings: Settings
) -> None:
    api = await _api(api_factory, settings)
    for message, answer in (
        ("what is #12 waiting for?", "#12 has no task"),
        ("what is left on #12?", "#12 has no task"),
        ("publish it", "Nothing to publish"),
    ):
        response = await api.post("/api/operator/chat/stream", json={"message": message})
        frames = await read_sse(response)
        done = frames[-1]["response"]
        if "#12" in message:
            assert done["retrieve_hits"], message  # memory holds #12: hits were found
        assert not any(line in done["reply"] for line in MEMORY_LINES), done["reply"]
        assert answer in done["reply"], done["reply"]
        statuses = [f.get("text", "") for f in frames if f.get("type") == "status"]
        assert not any("widening" in text for text in statuses), statuses


async def test_the_model_is_told_the_record_answers_and_is_not_asked_to_cite(
    api_factory: Any, settings: Settings
) -> None:
    scripted = ScriptedRuntime(drafts=[reply("Looking it up."), reply("Looking it up.")])
    api = await _api(api_factory, settings, runtimes=lambda agent: scripted)
    done = await (
        await api.post("/api/operator/chat", json={"message": "what is #12 waiting for?"})
    ).json()
    assert "#12 has no task" in done["reply"]
    [request] = scripted.requests  # no second draft for citing nothing
    assert request.facts.answered_by_record is True
    assert RECORD_NOTE in request.system
    assert NOTHING_ANSWERS not in request.system and "close_day" not in request.system


async def test_a_question_that_is_no_command_is_still_judged_by_memory(
    api_factory: Any, settings: Settings
) -> None:
    api = await _api(api_factory, settings)
    done = await (
        await api.post(
            "/api/operator/chat",
            json={"message": "Which Kubernetes version is #12 waiting for?"},
        )
    ).json()
    assert done["reply"].startswith(NOTHING_ANSWERS), done["reply"]
