"""A turn's facts carry the records Chat read, the committed files and the focused issue's
task, as themselves: the offline runtime reads their attributes, and the system prompt is
where the task becomes JSON (the task JSON of docs/api.md, whole)."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import msgspec

from bot.chat.committed_context import Prepared, base_grounding
from bot.chat.drafting import Drafting, runtime_request
from bot.chat.session_store import TurnSession
from bot.chat.turn import TurnContext
from bot.config import AgentConfig
from bot.contracts.chat import Frame
from bot.contracts.tasks import FocusedTask, LastEvent
from bot.dialogue import NOTHING_ANSWERS
from bot.runtimes.base import RuntimeRequest
from bot.runtimes.offline import OfflineRuntime, compose
from memory.committed import CommittedFile, CommittedMemory

TASK = FocusedTask(
    id=7,
    repo="octo/widgets",
    issue=41,
    # What the prompt's JSON escapes (<, >, &, ') must come back as it was.
    title="Cache <the> export & 'retry' it",
    state="waiting_for_info",
    archived=False,
    pr_url=None,
    cost_usd=0.25,
    tokens=1200,
    last_event=LastEvent(kind="transition", at="2026-12-05T10:00:00Z", detail="asked"),
    updated_at="2026-12-05T10:00:00Z",
    question='Redis or memcached? "either"',
    attempts=2,
)
COMMITTED = CommittedMemory(
    files=[
        CommittedFile("docs/memory/01-deploys.md", "Deploys happen on\n\nTuesdays only."),
        CommittedFile("docs/memory/02-cache.md", "The cache is Redis…", truncated=True),
    ],
    omitted=["docs/memory/03-later.md"],
)


async def _emit(frame: Frame) -> None:
    """Frames go nowhere: these tests read the request, not a stream."""


def _request(task: FocusedTask | None) -> RuntimeRequest:
    prepared = Prepared(COMMITTED, task, synced=RuntimeError("not read"), recent=[])
    agent = AgentConfig("main", "octo/widgets", Path("/srv/checkout"), "offline")
    session = TurnSession(
        id="s1",
        agent="main",
        title=None,
        focus=41,
        kind="discuss",
        decision_body=None,
        decision_issue=None,
    )
    drafting = Drafting(OfflineRuntime(), "where is it?", session, agent, _emit)
    return runtime_request(drafting, TurnContext(base_grounding(prepared, 0.2)), None)


def test_the_facts_carry_the_records_and_the_prompt_the_tasks_json() -> None:
    request = _request(TASK)
    assert request.facts.task is TASK
    assert request.facts.committed_memory == COMMITTED.files
    opening = '<untrusted-data source="task">\n'
    start = request.system.index(opening) + len(opening)
    block = request.system[start : request.system.index("\n</untrusted-data>", start)]
    assert msgspec.json.decode(block, type=FocusedTask) == TASK


def test_no_task_means_no_task_block_and_no_task_line() -> None:
    request = _request(None)
    assert request.facts.task is None
    assert 'source="task"' not in request.system
    assert "Task for #" not in compose(request)[0]


def test_the_offline_runtime_answers_from_the_records() -> None:
    reply, _ = compose(_request(TASK))
    assert "Task for #41: state `waiting_for_info`." in reply
    assert "Committed memory `docs/memory/01-deploys.md`: Deploys happen on Tuesdays only." in reply
    assert "Committed memory `docs/memory/02-cache.md`: The cache is Redis…" in reply


def test_an_empty_memory_is_said_once() -> None:
    """A question memory has nothing for, and no hit at all: the reply said both "nothing
    that answers this" and "nothing on this yet"."""
    request = _request(None)
    facts = dataclasses.replace(request.facts, hits=[], memory_answers=False)
    reply, _ = compose(dataclasses.replace(request, facts=facts))
    assert reply.startswith(NOTHING_ANSWERS)
    assert "nothing on this yet" not in reply
    filing = dataclasses.replace(facts, message="file an issue for the login page")
    assert (
        "Session memory has nothing on this yet."
        in compose(dataclasses.replace(request, facts=filing))[0]
    )
