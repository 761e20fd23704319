"""The web GUI's speed in Debian's Chromium, each figure beside a baseline from the same run.

(a) page load -> interactive (signed in, sessions listed, the active chat shown) for the real
    page, beside a bare page served the same way whose one module marks itself ready;
(b) first `delta` frame read by the page -> its text in the DOM -> the next frame, beside
    the page's own event -> next-frame latency (the floor for "painted in the next frame");
(c) opening a 1,000-message session (paged) beside opening a 10-message one.

    python -m bench.gui [--loads 20] [--turns 10] [--smoke]
"""

from __future__ import annotations

import argparse
import asyncio
import shutil
import tempfile
import uuid
from pathlib import Path
from typing import Any

from aiohttp import web

from bench._stats import percentile, ratio, summary_ms
from bot.clock import utcnow
from bot.config import Settings
from bot.models import ChatTurn
from bot.operators import create_operator
from bot.runtimes.offline import OfflineRuntime
from steelframe.parts import PARTS
from steelframe.server import create_app

STANDALONE = True
CHROMIUM = "/usr/bin/chromium"
ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
        "--disable-component-update", "--disable-sync", "--no-first-run"]  # fmt: skip
BARE_HTML = (
    "<!doctype html><html><head><script type=module src=/bare.js></script></head>"
    "<body></body></html>"
)
BARE_JS = "document.body.dataset.readyMs = String(Math.round(performance.now()));"
# Timestamps, in the page's clock: the first chunk holding a delta, the first reply text
# in the DOM, and the animation frame after it; plus the event -> next-frame floor.
PROBE = """
window.__probe = {};
const read = ReadableStreamDefaultReader.prototype.read;
ReadableStreamDefaultReader.prototype.read = async function () {
  const result = await read.call(this);
  if (!window.__probe.delta && result.value &&
      new TextDecoder().decode(result.value).includes('"type":"delta"'))
    window.__probe.delta = performance.now();
  return result;
};
addEventListener('DOMContentLoaded', () => new MutationObserver(() => {
  const body = document.querySelector('#messages .msg.assistant:last-child .body');
  if (window.__probe.delta && !window.__probe.dom && body && body.textContent) {
    window.__probe.dom = performance.now();
    requestAnimationFrame(() => { window.__probe.frame = performance.now(); });
  }
}).observe(document.documentElement, {subtree: true, childList: true, characterData: true}));
"""
FLOOR = """() => new Promise(done => setTimeout(() => {
  const start = performance.now();
  requestAnimationFrame(() => done(performance.now() - start));
}, 5))"""


async def serve(app: web.Application) -> tuple[web.AppRunner, str]:
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    return runner, f"http://127.0.0.1:{runner.addresses[0][1]}"


def bare_app() -> web.Application:
    async def page(request: web.Request) -> web.Response:
        return web.Response(text=BARE_HTML, content_type="text/html")

    async def script(request: web.Request) -> web.Response:
        return web.Response(text=BARE_JS, content_type="text/javascript")

    app = web.Application()
    app.router.add_get("/", page)
    app.router.add_get("/bare.js", script)
    return app


async def ready_ms(page: Any, url: str) -> float:
    await page.goto(url)
    await page.wait_for_selector("body[data-ready-ms]", state="attached")
    return float(await page.get_attribute("body", "data-ready-ms")) / 1000


async def load_times(page: Any, url: str, bare: str, loads: int) -> tuple[list[float], ...]:
    real, baseline = [], []
    for _ in range(loads):
        real.append(await ready_ms(page, url + "/"))
        baseline.append(await ready_ms(page, bare + "/"))
    return real, baseline


async def delta_paint(context: Any, url: str, turns: int) -> tuple[list[float], ...]:
    to_dom, to_frame, floor = [], [], []
    page = await context.new_page()
    await page.add_init_script(PROBE)
    for i in range(turns):
        await page.goto(url + "/")
        await page.wait_for_selector("#app:not([hidden])")
        floor.append(await page.evaluate(FLOOR) / 1000)
        await page.fill("#message", f"question {i}")
        await page.press("#message", "Enter")
        await page.wait_for_function("() => window.__probe.frame")
        probe = await page.evaluate("() => window.__probe")
        to_dom.append((probe["dom"] - probe["delta"]) / 1000)
        to_frame.append((probe["frame"] - probe["delta"]) / 1000)
        await page.wait_for_selector("#send:not([hidden])")
    await page.close()
    return to_dom, to_frame, floor


def seed(app: web.Application, operator_id: int, count: int) -> str:
    services = app[PARTS]
    sid = uuid.uuid4().hex

    def write(db: Any) -> None:
        from bot.models import ChatSession

        now = utcnow()
        db.add(
            ChatSession(
                id=sid, operator_id=operator_id, agent="default", title=f"{count} messages",
                created_at=now, last_activity_at=now,
            )
        )  # fmt: skip
        db.flush()
        for seq in range(count):
            db.add(
                ChatTurn(
                    id=f"{sid}-{seq}", session_id=sid, seq=seq,
                    role="user" if seq % 2 == 0 else "assistant",
                    content=f"message {seq}: some **markdown** and `code`", meta={},
                    created_at=now,
                )
            )  # fmt: skip

    services.db.call(write)
    return sid


OPEN = """async ([sid, last]) => {
  const start = performance.now();
  document.querySelector(`[data-session='${sid}'] .session-open`).click();
  await new Promise(done => {
    const tick = () => document.querySelector(`#messages [data-id='${last}']`)
      ? requestAnimationFrame(done) : requestAnimationFrame(tick);
    tick();
  });
  return performance.now() - start;
}"""


async def open_times(
    page: Any, url: str, sessions: tuple[tuple[str, int], tuple[str, int]], loads: int
) -> tuple[list[float], list[float]]:
    """Click a session in the sidebar -> its newest message painted (the next frame),
    alternating the two sessions so each click really loads and paints its session."""
    await page.goto(url + "/")
    await page.wait_for_selector("#app:not([hidden])")
    for sid, _ in sessions:  # the sidebar's list arrives after the app shows (not timed)
        await page.wait_for_selector(f"[data-session='{sid}'] .session-open")
    samples: tuple[list[float], list[float]] = ([], [])
    for _ in range(loads):
        for index, (sid, count) in enumerate(sessions):
            took = await page.evaluate(OPEN, [sid, f"{sid}-{count - 1}"])
            samples[index].append(took / 1000)
    return samples


async def run(loads: int, turns: int) -> None:
    from playwright.async_api import async_playwright

    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        (root / "checkout").mkdir()
        settings = Settings.from_env(
            {},
            defaults={
                "database_url": f"sqlite:///{root / 'db.sqlite'}",
                "data_dir": root / "var",
                "checkout": root / "checkout",
            },
        )
        app = create_app(settings, runtimes=lambda agent: OfflineRuntime(token_delay=0.005))
        runner, url = await serve(app)
        bare_runner, bare = await serve(bare_app())
        operator, token = app[PARTS].db.call(create_operator, "bench")
        long_sid = seed(app, operator.id, 1000)
        short_sid = seed(app, operator.id, 10)
        try:
            async with async_playwright() as playwright:
                browser = await playwright.chromium.launch(executable_path=CHROMIUM, args=ARGS)
                context = await browser.new_context(viewport={"width": 1280, "height": 800})
                page = await context.new_page()
                await page.goto(url + "/")
                await page.fill("#token", token)
                await page.click("#signin-form button[type=submit]")
                await page.wait_for_selector("#app:not([hidden])")
                real, baseline = await load_times(page, url, bare, loads)
                long_open, short_open = await open_times(
                    page, url, ((long_sid, 1000), (short_sid, 10)), max(2, loads // 2)
                )
                to_dom, to_frame, floor = await delta_paint(context, url, turns)
                await browser.close()
        finally:
            await runner.cleanup()
            await bare_runner.cleanup()  # the app's own cleanup closed its parts
    report(real, baseline, to_dom, to_frame, floor, long_open, short_open)


def report(*samples: list[float]) -> None:
    real, baseline, to_dom, to_frame, floor, long_open, short_open = samples
    pad = " " * 24
    print(f"web GUI in {CHROMIUM}, {len(real)} loads, {len(to_dom)} turns")
    print(f"  load -> interactive   gui  {summary_ms(real)}")
    print(f"{pad}bare {summary_ms(baseline)}")
    print(f"{pad}ratio p50 {ratio(percentile(real, 50), percentile(baseline, 50))}")
    print(f"  first delta -> DOM    {summary_ms(to_dom)}")
    print(f"  first delta -> frame  {summary_ms(to_frame)}")
    print(f"  event -> frame floor  {summary_ms(floor)}")
    print(f"{pad}ratio p50 {ratio(percentile(to_frame, 50), percentile(floor, 50))}")
    print(f"  open 1,000 messages   {summary_ms(long_open)}")
    print(f"  open 10 messages      {summary_ms(short_open)}")
    print(f"{pad}ratio p50 {ratio(percentile(long_open, 50), percentile(short_open, 50))}")


def main(argv: list[str]) -> None:
    parser = argparse.ArgumentParser(prog="bench.gui")
    parser.add_argument("--loads", type=int, default=20)
    parser.add_argument("--turns", type=int, default=10)
    parser.add_argument("--smoke", action="store_true")
    args = parser.parse_args(argv)
    if not (Path(CHROMIUM).exists() or shutil.which("chromium")):
        print(f"bench.gui did not run: no Chromium at {CHROMIUM}")
        return
    loads, turns = (2, 1) if args.smoke else (args.loads, args.turns)
    asyncio.run(run(loads, turns))


if __name__ == "__main__":
    import sys

    main(sys.argv[1:])
