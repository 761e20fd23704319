"""Words forgotten (`forget that <words>`) leave the TUI's open transcript: told by a
`session` event (`forgotten`, docs/api.md), it reads the chat again, whether the forget
came from another client or was said in that very chat."""

from __future__ import annotations

from tests.conftest import ApiClient
from tests.fakes.tui import SIZE, ready, replies, send, tui, until, user_messages
from tui_client.app import SteelframeApp

WORD = "zebraquartz"


def _shown(app: SteelframeApp) -> str:
    return " ".join([*user_messages(app), *(m.reply_text for m in replies(app))])


async def test_a_forget_from_another_client_leaves_the_open_transcript(api: ApiClient) -> None:
    app = tui(api)
    async with app.run_test(size=SIZE) as pilot:
        await ready(pilot, app)
        await send(pilot, app, f"the staging door code is {WORD}")
        assert WORD in _shown(app)
        elsewhere = await (await api.post("/api/operator/chat/new", json={})).json()
        said = await api.post(
            "/api/operator/chat",
            json={"message": f"forget that {WORD}", "session": elsewhere["id"]},
        )
        assert said.status == 200, await said.text()
        await until(pilot, lambda: WORD not in _shown(app), lambda: _shown(app))
        assert "the staging door code is" in _shown(app)


async def test_a_forget_said_in_the_open_chat_leaves_its_earlier_messages(api: ApiClient) -> None:
    app = tui(api)
    async with app.run_test(size=SIZE) as pilot:
        await ready(pilot, app)
        await send(pilot, app, f"the staging door code is {WORD}")
        await send(pilot, app, f"forget that {WORD}")
        await until(pilot, lambda: WORD not in _shown(app), lambda: _shown(app))
        assert "the staging door code is" in _shown(app)
