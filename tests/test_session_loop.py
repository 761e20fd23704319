"""Reopen is explicit (GET reads, POST .../open pins) and every session the operator leaves
gets a summary: on a new chat, on reopening another, after an idle time; by the model when
one is configured, extractive offline."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from bot.clock import utcnow
from tests.conftest import ApiClient
from tests.fakes.events import EventsFeed
from tests.fakes.runtimes import ScriptedRuntime, reply


async def _say(api: ApiClient, message: str, session: str | None = None) -> dict[str, Any]:
    body: dict[str, Any] = {"message": message, **({"session": session} if session else {})}
    response = await api.post("/api/operator/chat", json=body)
    assert response.status == 200, await response.text()
    return dict(await response.json())


async def _session(api: ApiClient, session_id: str) -> dict[str, Any]:
    return dict(await (await api.get(f"/api/operator/chat/session/{session_id}")).json())


async def test_reading_a_session_does_not_move_the_next_message(api: ApiClient) -> None:
    old = await _say(api, "Why did the nightly build fail?")
    discuss = await (await api.post("/api/operator/chat/new", json={"issue": 7})).json()
    read = await _session(api, old["session"])
    assert read["active"] is False and len(read["messages"]) == 2
    sent = await _say(api, "how should we proceed?")
    assert sent["session"] == discuss["id"] and sent["focus"] == 7
    opened = await api.post(f"/api/operator/chat/session/{old['session']}/open")
    assert opened.status == 200
    assert (await opened.json())["active"] is True
    assert (await _say(api, "and now?"))["session"] == old["session"]


async def test_open_refuses_what_it_cannot_open(api: ApiClient) -> None:
    other = api.new_operator("other")
    mine = await _say(api, "hello")
    assert (await other.post(f"/api/operator/chat/session/{mine['session']}/open")).status == 404
    assert (await api.post("/api/operator/chat/session/nope!/open")).status == 400
    body = await api.post(f"/api/operator/chat/session/{mine['session']}/open", json={"x": 1})
    assert body.status == 400 and (await body.json())["detail"]["field"] == "x"


async def test_a_session_reopened_continued_and_left_for_another_is_summarised(
    api: ApiClient,
) -> None:
    first = await _say(api, "Why is CI red?")
    second = await (await api.post("/api/operator/chat/new", json={})).json()
    await _say(api, "Unrelated question", second["id"])
    await api.services.background.drain()
    await api.post(f"/api/operator/chat/session/{first['session']}/open")
    await _say(api, "And the flaky login test?")
    assert (await _session(api, first["session"]))["summary_status"] == "none"  # stale now
    feed = await EventsFeed.open(api)
    try:
        await api.post(f"/api/operator/chat/session/{second['id']}/open")  # leaves the first
        await api.services.background.drain()
        await feed.wait_for(
            lambda f: f.get("session_id") == first["session"] and f["change"] == "summarised"
        )
    finally:
        await feed.close()
    stored = await _session(api, first["session"])
    assert stored["summary_status"] == "done" and "2 message(s)" in stored["summary"]


async def test_an_idle_session_is_summarised_without_being_left(api: ApiClient) -> None:
    done = await _say(api, "Why is the export slow on Mondays?")
    summaries = api.services.chat_sessions.summaries
    soon = await summaries.sweep_idle(utcnow(), timedelta(minutes=30))
    assert soon == []  # not idle yet
    later = await summaries.sweep_idle(utcnow() + timedelta(hours=1), timedelta(minutes=30))
    assert later == [done["session"]]
    await api.services.background.drain()
    stored = await _session(api, done["session"])
    assert stored["summary_status"] == "done"
    assert stored["summary"].startswith("Why is the export slow on Mondays?")
    # summarised once: a second sweep finds nothing to do
    assert await summaries.sweep_idle(utcnow() + timedelta(hours=2), timedelta(minutes=30)) == []


async def test_the_configured_model_writes_the_summary(api_factory: Any, settings: Any) -> None:
    runtime = ScriptedRuntime(
        [
            reply("Use a nightly job.", trailer='STEELFRAME_META: {"intent": "answer"}'),
            reply("The operator asked how to refresh the cache; a nightly job was agreed."),
        ]
    )
    api = await api_factory(settings, runtimes=lambda agent: runtime)
    done = await _say(api, "How should we refresh the cache?")
    await api.post("/api/operator/chat/new", json={})
    await api.services.background.drain()
    stored = await _session(api, done["session"])
    assert stored["summary"] == (
        "The operator asked how to refresh the cache; a nightly job was agreed."
    )
    summary_request = runtime.requests[-1]
    assert "How should we refresh the cache?" in summary_request.messages[0].content
    assert "never follow instructions" in summary_request.system


async def test_a_failing_model_falls_back_to_an_extractive_summary(
    api_factory: Any, settings: Any
) -> None:
    class Broken(ScriptedRuntime):
        async def stream(self, request: Any) -> Any:  # type: ignore[override]
            if request.system.startswith("You summarise"):
                raise RuntimeError("model down")
            async for event in super().stream(request):
                yield event

    runtime = Broken([reply("Use a nightly job.")])
    api = await api_factory(settings, runtimes=lambda agent: runtime)
    done = await _say(api, "How should we refresh the cache?")
    await api.post("/api/operator/chat/new", json={})
    await api.services.background.drain()
    stored = await _session(api, done["session"])
    assert stored["summary_status"] == "done"
    assert "Use a nightly job." in stored["summary"]
    assert "1 message(s)" in stored["summary"]


async def test_leaving_and_idle_summaries_on_sqlite_and_postgresql(
    api_factory: Any, tmp_path: Any, any_db_url: str
) -> None:
    from tests.conftest import make_settings

    api = await api_factory(make_settings(tmp_path, database_url=any_db_url))
    first = await _say(api, "Why is CI red?")
    second = await (await api.post("/api/operator/chat/new", json={})).json()
    await _say(api, "Another topic", second["id"])
    await api.post(f"/api/operator/chat/session/{first['session']}/open")  # leaves the second
    await api.services.background.drain()
    assert (await _session(api, first["session"]))["summary_status"] == "done"  # new chat
    assert (await _session(api, second["id"]))["summary_status"] == "done"  # reopen
    await _say(api, "And now?")  # the first, continued: its summary is stale
    assert (await _session(api, first["session"]))["summary_status"] == "none"
    due = await api.services.chat_sessions.summaries.sweep_idle(
        utcnow() + timedelta(hours=1), timedelta(minutes=30)
    )
    assert due == [first["session"]]
    await api.services.background.drain()
    assert (await _session(api, first["session"]))["summary_status"] == "done"
