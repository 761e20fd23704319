"""What a Board card and the Dashboard show travels with the Board's list and the `task`
event (bot.contracts.tasks.BoardTask, bot.contracts.events.TaskFrame): a waiting task's
question and its pull request loop, so no client reads each task again for them."""

from __future__ import annotations

import msgspec

from bot.contracts.tasks import Board
from tests.fakes.coding import command
from tests.fakes.events import EventsFeed
from tests.fakes.lifecycle import Make
from tests.fakes.lifecycle import make_fixture as make_fixture  # the `make` fixture

QUESTION = "Should the cache use Redis or SQLite?"  # what command("question") asks


async def test_a_waiting_tasks_question_is_in_its_task_event_and_on_the_board(
    make: Make,
) -> None:
    lc = await make(coding_command=command("question"))
    feed = await EventsFeed.open(lc.api, last_event_id=0)
    try:
        issue = await lc.open_issue("Add a cache")
        await lc.work()
        waiting = await feed.wait_for(
            lambda f: f["type"] == "task" and f["state"] == "waiting_for_info"
        )
        assert waiting["issue"] == issue and waiting["question"] == QUESTION
        # Before it waited it asked nothing: a queued or running card has no question.
        earlier = [f for f in feed.of_type("task") if f["state"] != "waiting_for_info"]
        assert earlier and all(f["question"] is None for f in earlier)
        assert all(f["pr_state"] is None and f["review"]["summary"] == "" for f in earlier)
    finally:
        await feed.close()
    response = await lc.api.get("/api/operator/board")
    assert response.status == 200
    board = msgspec.json.decode(await response.read(), type=Board)  # strictly, as declared
    (card,) = [task for task in board.tasks if task.issue == issue]
    assert card.state == "waiting_for_info" and card.question == QUESTION
