"""The openings several TUI tests share, each an async context manager over `run_test`: a
turn held at the model, a Discuss chat whose turn drafted a Decision, and the app started
against an address where nothing answers yet (until the test brings the service up there)."""

from __future__ import annotations

import asyncio
import socket
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from textual.pilot import Pilot

from tests.conftest import ApiClient, make_settings
from tests.fakes.proxy import LoopbackProxy
from tests.fakes.runtimes import ScriptedRuntime, reply
from tests.fakes.tui import SIZE, notices, ready, send, tui, until
from tui_client.app import SteelframeApp
from tui_client.transcript import AssistantMessage

DRAFT_ASK = "draft a decision: ship the blue-green deploy"


@dataclass
class HeldTurn:
    """The app, its pilot and service, the model whose gate holds the turn, and the turn's
    reply (still running)."""

    app: SteelframeApp
    pilot: Pilot[None]
    api: ApiClient
    runtime: ScriptedRuntime
    message: AssistantMessage

    def release(self) -> None:
        """Open the model's gate: the held turn (and every later one) answers."""
        assert self.runtime.gate is not None
        self.runtime.gate.set()


@asynccontextmanager
async def held_turn(
    api_factory: Any,
    tmp_path: Path,
    question: str,
    *,
    answer: str = "The long answer.",
    before: Callable[[ApiClient], None] | None = None,
) -> AsyncIterator[HeldTurn]:
    """The TUI on a service whose model answers `answer` once its gate opens; `question`
    sent and the model called, its turn held there. `before` prepares the service first."""
    runtime = ScriptedRuntime([reply(answer)], gate=asyncio.Event())
    api = await api_factory(make_settings(tmp_path), runtimes=lambda agent: runtime)
    if before is not None:
        before(api)
    app = tui(api)
    async with app.run_test(size=SIZE) as pilot:
        await ready(pilot, app)
        message = await send(pilot, app, question, wait=False)
        await until(pilot, lambda: len(runtime.requests) == 1, "the model call")
        yield HeldTurn(app, pilot, api, runtime, message)


async def draft_decision(
    pilot: Pilot[None], app: SteelframeApp, issue: int, ask: str = DRAFT_ASK
) -> AssistantMessage:
    """Discuss `issue` in the running app and send `ask`: the reply drafting its Decision."""
    await ready(pilot, app)
    app.chat.start_discuss(issue)
    await until(pilot, lambda: app.chat.state.focus == issue, "the Discuss session")
    return await send(pilot, app, ask)


@dataclass
class DraftedDecision:
    app: SteelframeApp
    pilot: Pilot[None]
    message: AssistantMessage  # the reply with the draft under it


@asynccontextmanager
async def discuss_draft(
    api: ApiClient, issue: int = 7, ask: str = DRAFT_ASK
) -> AsyncIterator[DraftedDecision]:
    """The TUI with a Discuss chat on `issue` whose turn drafted a Decision."""
    app = tui(api)
    async with app.run_test(size=SIZE) as pilot:
        yield DraftedDecision(app, pilot, await draft_decision(pilot, app, issue, ask))


@dataclass
class Unreachable:
    """The app started against `url`, bound and not listening (refused: nobody else can
    take the address meanwhile) until `come_up` puts the service there."""

    app: SteelframeApp
    pilot: Pilot[None]
    url: str
    api: ApiClient
    address: socket.socket
    proxy: LoopbackProxy | None = None

    async def come_up(self) -> None:
        """The service answers at `url` from now on (on this same socket)."""
        self.proxy = LoopbackProxy(self.api.raw.port, cut_first=False, sock=self.address)
        await self.proxy.start()


@asynccontextmanager
async def unreachable_at_start(api: ApiClient) -> AsyncIterator[Unreachable]:
    """The TUI started where no service answers, once it has said so."""
    with socket.socket() as address:
        address.bind(("127.0.0.1", 0))
        url = f"http://127.0.0.1:{address.getsockname()[1]}"
        app = tui(api, url=url)
        async with app.run_test(size=SIZE) as pilot:
            await until(pilot, lambda: bool(notices(app)), "the start-up error")
            opened = Unreachable(app, pilot, url, api, address)
            try:
                yield opened
            finally:
                if opened.proxy is not None:
                    await opened.proxy.close()
