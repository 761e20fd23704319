"""The composition root (steelframe/composition.py): the app's parts are built once, at
start-up, and each shell gets one typed object of its own, built whole; at exit they are
closed. A GitHub App gives Chat its GitHub-backed pieces at construction."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from aiohttp.test_utils import TestServer

from bot.chat.operator_commands import OperatorCommands
from operator_api.deps import OPERATOR_API
from steelframe.parts import PARTS
from steelframe.server import create_app
from tests.conftest import ApiClient, make_settings
from web_gui.deps import GUI
from webhooks.deps import WEBHOOKS


async def test_the_shells_objects_are_built_at_start_up_on_one_set_of_parts(
    tmp_path: Path, aiohttp_client: Any
) -> None:
    app = create_app(make_settings(tmp_path))
    assert OPERATOR_API not in app and PARTS not in app  # nothing opened before start-up
    client = await aiohttp_client(TestServer(app))
    parts = app[PARTS]
    api, hooks, gui = app[OPERATOR_API], app[WEBHOOKS], app[GUI]
    assert api.db is hooks.db is gui.db is parts.db  # one database per process
    assert api.chat_turns is parts.chat_turns and api.events is parts.events
    assert api.chat_sessions is parts.chat_sessions
    # No GitHub App here: no filing or publishing (their routes answer 503), no issue reader.
    assert api.filing is None and api.publisher is None and api.chat_turns.issues is None
    answer = await client.get("/readyz")
    assert answer.status in (200, 503)
    assert "database" in (await answer.json())["checks"]
    assert _running("webhook-") == {"webhook-processor", "webhook-sweeper", "webhook-heartbeat"}
    await client.close()
    assert _running("webhook-") == set()  # stopped at exit, before the parts were closed


def _running(prefix: str) -> set[str]:
    return {t.get_name() for t in asyncio.all_tasks() if t.get_name().startswith(prefix)}


async def test_with_a_github_app_chat_is_built_whole_with_its_github_pieces(
    github_service: ApiClient,
) -> None:
    app = github_service.raw.app
    api = app[OPERATOR_API]
    assert api.filing is not None and api.publisher is not None
    chat = api.chat_turns
    assert chat.issues is not None and chat.checkouts is not None
    assert isinstance(chat.policy, OperatorCommands)
    # The webhook handlers keep Chat's checkouts fresh: the same object, not a copy.
    assert app[WEBHOOKS].processor.ctx.checkouts is chat.checkouts
