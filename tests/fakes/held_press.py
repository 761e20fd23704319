"""A TUI key pressed again while the service's answer to its first press is held
(`tests.fakes.tui.HeldAnswers`): the second press must send nothing and must not type the
letter, and the first press's answer, once released, is shown."""

from __future__ import annotations

from collections.abc import Callable

from textual.pilot import Pilot

from tests.fakes.tui import HeldAnswers, notices, ready, until
from tui_client.app import SteelframeApp


async def press_again_while_held(
    pilot: Pilot[None],
    app: SteelframeApp,
    held: HeldAnswers,
    key: str,
    *,
    answered: Callable[[str], bool],
    what: str,
) -> None:
    """Press `key`, hold the service's answer, press it again, release: the request was
    sent once and the notice `answered` looks for came. `what` names the wait."""
    held.holding = True
    await pilot.press(key)
    await until(pilot, lambda: held.held == 1, f"the {what}'s answer to be held")
    await pilot.press(key)
    assert app.chat.composer.value == ""  # the key was the action's, not a letter
    held.release.set()
    await until(
        pilot,
        lambda: any(answered(n) for n in notices(app)),
        lambda: f"the {what}, got {notices(app)}",
    )
    await ready(pilot, app)
    assert held.asked == 1
