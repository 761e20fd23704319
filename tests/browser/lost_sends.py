"""A chat message whose first send goes wrong on the way, for the GUI's Retry tests: the
page's chat stream requests are recorded (idempotency key and body), and the first is lost
either before the service gets it or after the service took it and ran its turn (only its
answer lost: the connection reset). Every later send goes through. `send_first_lost` sends a
message that way from the composer; `open_chat` opens a chat from the sidebar."""

from __future__ import annotations

from typing import Any

CHAT_STREAM = "**/api/operator/chat/stream"


class FirstSendLost:
    def __init__(self, *, answer_only: bool) -> None:
        self.answer_only = answer_only  # True: the service took it; False: it never arrived
        self.sent: list[tuple[str | None, Any]] = []  # (idempotency key, body) of each send

    async def route(self, route: Any) -> None:
        request = route.request
        self.sent.append((await request.header_value("idempotency-key"), request.post_data_json))
        if len(self.sent) > 1:
            await route.continue_()
        elif self.answer_only:
            await route.fetch()  # the service took the message and ran its turn...
            await route.abort("connectionreset")  # ...and its answer never reached the page
        else:
            await route.abort("connectionfailed")  # the service never got it


async def send_first_lost(page: Any, text: str, *, answer_only: bool) -> tuple[FirstSendLost, Any]:
    """Send `text` from the composer with its first send lost; the recorder and the page's
    "Not sent" toast (whose Retry sends it again), once shown."""
    sends = FirstSendLost(answer_only=answer_only)
    await page.route(CHAT_STREAM, sends.route)
    await page.fill("#message", text)
    await page.press("#message", "Enter")
    lost = page.locator("#toasts .toast.error", has_text="Not sent")
    await lost.wait_for()
    return sends, lost


async def open_chat(page: Any, session_id: str) -> None:
    """The operator opens this chat in the sidebar; back once it is the current one."""
    await page.click(f"[data-session='{session_id}'] .session-open")
    await page.wait_for_selector(f"#session-list .session.current[data-session='{session_id}']")
