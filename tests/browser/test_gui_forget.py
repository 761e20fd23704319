"""Words forgotten (`forget that <words>`) leave the chat the page shows: told by a
`session` event (`forgotten`, docs/api.md), the page reads the chat again, whether the
forget came from another client or from a turn in that very chat, and keeps what the
operator has not sent yet."""

from __future__ import annotations

from tests.browser.conftest import GuiFactory
from tests.conftest import ApiClient

WORD = "zebraquartz"
GONE = f"() => !document.querySelector('#messages').innerText.includes('{WORD}')"


async def test_a_forget_from_another_client_leaves_the_open_chat(
    api: ApiClient, gui_factory: GuiFactory
) -> None:
    gui = await gui_factory(api)
    await gui.send(f"the staging door code is {WORD}")
    await gui.wait_done()
    assert WORD in await gui.page.inner_text("#messages")
    await gui.page.fill("#message", "not sent yet")
    # The same operator in another chat, from another client (a TUI, a script).
    elsewhere = await (await api.post("/api/operator/chat/new", json={})).json()
    said = await api.post(
        "/api/operator/chat", json={"message": f"forget that {WORD}", "session": elsewhere["id"]}
    )
    assert said.status == 200, await said.text()
    await gui.page.wait_for_function(GONE)
    assert "the staging door code is" in await gui.page.inner_text("#messages")
    assert await gui.page.input_value("#message") == "not sent yet"


async def test_a_forget_said_in_the_open_chat_leaves_its_earlier_messages(
    api: ApiClient, gui_factory: GuiFactory
) -> None:
    gui = await gui_factory(api)
    await gui.send(f"the staging door code is {WORD}")
    await gui.wait_done()
    await gui.send(f"forget that {WORD}")
    await gui.wait_done()
    await gui.page.wait_for_function(GONE)
    assert "the staging door code is" in await gui.page.inner_text("#messages")
