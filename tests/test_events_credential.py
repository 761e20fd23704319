"""An open events stream ends once its credential no longer opens the API: an operator's
token revoked (`steelframe operator revoke`), or the browser's sign-in ended; the client's
re-open is then refused with the 401 that says why. A stream whose credential still works
runs on through the checks (operator_api/events_routes.py)."""

from __future__ import annotations

import asyncio
import itertools

from sqlalchemy import select

from bot.events.publisher import SessionChange
from bot.models import Operator
from bot.operators import hash_token, revoke_token
from bot.web_sessions import sign_in, sign_out
from http_edge.cookies import SESSION_COOKIE
from tests.conftest import ApiClient
from tests.fakes.events import EVENTS, EventsFeed


def _operator(api: ApiClient) -> int:
    digest = hash_token(api.token)
    found = api.services.db.call(
        lambda s: s.scalar(select(Operator.id).where(Operator.token_hash == digest))
    )
    assert found is not None
    return int(found)


def _name(api: ApiClient) -> str:
    digest = hash_token(api.token)
    name = api.services.db.call(
        lambda s: s.scalar(select(Operator.name).where(Operator.token_hash == digest))
    )
    assert name is not None
    return str(name)


async def test_a_revoked_tokens_open_stream_ends_and_its_reopen_is_refused(
    api: ApiClient,
) -> None:
    feed = await EventsFeed.open(api)
    await feed.wait_pings(6)  # past several checks (every other heartbeat): it runs on
    assert not feed.ended
    api.services.db.call(revoke_token, _name(api))
    await feed.wait_ended()
    reopened = await api.get(EVENTS, headers={"Last-Event-ID": "0"})
    assert reopened.status == 401, await reopened.text()
    assert "invalid bearer token" in (await reopened.json())["error"]
    await feed.close()


async def test_a_browsers_stream_ends_when_its_sign_in_does(api: ApiClient) -> None:
    signed = api.services.db.call(sign_in, api.token)
    cookies = {SESSION_COOKIE: signed.cookie}
    response = await api.raw.get(EVENTS, cookies=cookies)
    assert response.status == 200, await response.text()
    feed = EventsFeed(response)
    await feed.wait_pings(6)
    assert not feed.ended
    api.services.db.call(sign_out, signed.cookie)
    await feed.wait_ended()
    reopened = await api.raw.get(EVENTS, cookies=cookies)
    assert reopened.status == 401, await reopened.text()
    await feed.close()


async def test_a_revoked_tokens_stream_ends_while_events_keep_it_busy(api: ApiClient) -> None:
    """Events coming faster than the heartbeat leave no heartbeat to check at: the check
    is made by the clock, whatever the stream writes next."""
    operator_id = _operator(api)
    events = api.services.events

    async def busy() -> None:
        # The next event as soon as the stream has written the last one: paced by the stream
        # itself, not by a sleep, so it leaves no heartbeat's silence while the machine keeps up.
        for n in itertools.count():
            session = f"s-{n}"
            await asyncio.to_thread(
                events.session_changed, operator_id, session, SessionChange.UPDATED
            )
            await feed.wait_for(lambda frame, session=session: frame.get("session_id") == session)

    feed = await EventsFeed.open(api)
    publishing = asyncio.create_task(busy())
    try:
        await feed.wait_for(lambda frame: frame.get("type") == "session")
        api.services.db.call(revoke_token, _name(api))
        await feed.wait_ended()
    finally:
        publishing.cancel()
        await feed.close()
