from __future__ import annotations

from tests.browser.conftest import GuiFactory
from tests.conftest import ApiClient


async def test_smoke(api: ApiClient, gui_factory: GuiFactory) -> None:
    gui = await gui_factory(api)
    await gui.send("hello there")
    await gui.wait_done()
    print(await gui.page.inner_text("#messages"))
    print(gui.console_errors)
    await gui.page.screenshot(path="/tmp/gui_smoke.png")
    assert not gui.console_errors
