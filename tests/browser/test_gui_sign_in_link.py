"""Sign-in links in a real browser: a `#token=` link signs nobody in, a `#code=` link asks
whose account it opens, signs in once, and never leaves a secret in the address bar."""

from __future__ import annotations

from tests.browser.conftest import WAIT_MS, GuiFactory
from tests.conftest import ApiClient
from tests.test_gui_auth import mint_code


async def test_a_token_in_the_link_signs_nobody_in(api: ApiClient, gui_factory: GuiFactory) -> None:
    gui = await gui_factory(api, sign_in=False)
    await gui.open(f"/#token={api.token}")
    await gui.page.wait_for_selector("#signin:not([hidden])", timeout=WAIT_MS)
    assert await gui.page.is_hidden("#app")
    assert api.token not in gui.page.url
    assert (await gui.page.context.cookies()) == []


async def test_a_code_link_asks_then_signs_in_once(api: ApiClient, gui_factory: GuiFactory) -> None:
    code = await mint_code(api)
    gui = await gui_factory(api, sign_in=False)
    await gui.open(f"/#code={code}")
    question = await gui.page.inner_text("#link-question")
    assert question.startswith("Sign in as op-")
    assert code not in gui.page.url  # gone from the address bar before anything else
    await gui.page.click("#link-confirm")
    await gui.page.wait_for_selector("#app:not([hidden])", timeout=WAIT_MS)
    assert code not in gui.page.url
    assert not await gui.page.evaluate(
        f"() => history.state !== null || location.href.includes({code!r})"
    )

    # The same link in another browser (sent on, or replayed): refused, nobody signed in.
    other = await gui_factory(api, sign_in=False)
    await other.open(f"/#code={code}")
    await other.page.wait_for_selector("#signin-form:not([hidden])", timeout=WAIT_MS)
    assert "did not work" in await other.page.inner_text("#signin-error")
    assert await other.page.is_hidden("#app")
