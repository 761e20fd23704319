"""The whole Discuss loop: Discuss #N -> decide -> publish -> webhook -> the task resumes."""

from __future__ import annotations

from bot.lifecycle.states import TaskState
from tests.fakes.coding import command
from tests.fakes.lifecycle import Make
from tests.fakes.lifecycle import make_fixture as make_fixture  # the `make` fixture


async def test_a_published_decision_resumes_the_waiting_task(make: Make) -> None:
    lc = await make(coding_command=command("question"))
    issue = await lc.open_issue("Add a cache")
    await lc.work()
    assert lc.task(issue).state == TaskState.WAITING_FOR_INFO
    api = lc.api

    session = await (await api.post("/api/operator/chat/new", json={"issue": issue})).json()
    assert session["title"] == f"Discuss #{issue}"
    done = await (
        await api.post(
            "/api/operator/chat",
            json={"message": "draft a decision: Use Redis.", "session": session["id"]},
        )
    ).json()
    assert done["intent"] == "decide" and done["decision_issue"] == issue
    assert lc.task(issue).state == TaskState.WAITING_FOR_INFO  # a draft posts nothing

    published = await api.post(
        "/api/operator/chat/decision",
        json={"issue": issue, "body": done["decision_body"], "session_id": session["id"]},
    )
    assert published.status == 200
    await lc.settle()
    task = lc.task(issue)
    assert task.state == TaskState.RUNNING and task.pending_decision == "Use Redis."
    assert "steelframe:needs_human" not in await lc.labels(issue)
    await lc.work()
    assert lc.task(issue).state == TaskState.DELIVERED
    answer = lc.branch_file("ANSWER.md", f"steelframe/issue-{issue}")
    assert answer is not None and "decision: Use Redis." in answer


async def test_a_focused_turn_sees_the_issues_task_state(make: Make) -> None:
    lc = await make(coding_command=command("question"))
    issue = await lc.open_issue("Add a cache")
    await lc.work()
    done = await (
        await lc.api.post("/api/operator/chat", json={"message": "where is it?", "focus": issue})
    ).json()
    assert f"Task for #{issue}: state `waiting_for_info`" in done["reply"]


async def test_the_same_decision_text_published_twice_resumes_twice(make: Make) -> None:
    """Issue 13, item 4: "Yes, proceed" to two questions in a row is two Decisions."""
    lc = await make(coding_command=command("ask_twice"))
    issue = await lc.open_issue("Two questions")
    await lc.work()
    assert lc.task(issue).question == "Question 1: proceed?"
    for round_ in (1, 2):
        published = await lc.api.post(
            "/api/operator/chat/decision", json={"issue": issue, "body": "Yes, proceed"}
        )
        assert published.status == 200
        await lc.settle()
        task = lc.task(issue)
        assert task.state == TaskState.RUNNING and task.pending_decision == "Yes, proceed"
        await lc.work()
        if round_ == 1:
            assert lc.task(issue).state == TaskState.WAITING_FOR_INFO
            assert lc.task(issue).question == "Question 2: proceed?"
            assert "steelframe:needs_human" in await lc.labels(issue)
    assert lc.task(issue).state == TaskState.DELIVERED
    rounds = lc.branch_file("ROUND.md", f"steelframe/issue-{issue}")
    assert rounds == "decision 1\ndecision 2\n"
    decisions = [c for c in await lc.comments(issue) if "steelframe-decision" in c["body"]]
    decisions = [c for c in decisions if "Yes, proceed" in c["body"]]
    assert len(decisions) == 2
