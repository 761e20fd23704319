"""The web GUI's live-update pauses, shortened for a test (web_gui/static/events.js, its test
hook `window.steelframeTestTimeScale`): the Board polls every 4 s x TIME_SCALE, the stream
is re-opened after 1, 2, 4 ... s x TIME_SCALE, all in the same proportions as in a real page,
so a test checks the same sequence in a few seconds. Give it to a page before it loads:
`await page.add_init_script(FASTER_PAUSES)` (then sign in)."""

from __future__ import annotations

TIME_SCALE = 0.05  # a poll every 0.2 s
FASTER_PAUSES = f"window.steelframeTestTimeScale = {TIME_SCALE};"
