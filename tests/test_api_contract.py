"""The response check (tests/api_contract.py) bites: an answer that breaks the app's OpenAPI
document fails the test, whether it is a JSON body, an undocumented status, an undocumented
path or one frame of an event stream, and through the TUI's client as well."""

from __future__ import annotations

from typing import Any

import pytest

from operator_api.openapi import OPENAPI_DOCUMENT
from tests.conftest import ApiClient, read_sse


def _document(api: ApiClient) -> dict[str, Any]:
    document: dict[str, Any] = api.raw.app[OPENAPI_DOCUMENT]
    return document


def _forget(api: ApiClient, count: int) -> None:
    """The deliberate mismatches were seen; drop them so the fixture's teardown passes."""
    assert len(api.contract.problems) == count
    api.contract.problems.clear()


async def test_a_body_that_breaks_its_schema_fails(api: ApiClient) -> None:
    health = _document(api)["components"]["schemas"]["Health"]
    health["properties"]["version"] = {"type": "integer"}
    with pytest.raises(AssertionError, match="version"):
        await api.raw.get("/healthz")
    del health["properties"]["version"]
    health["required"].remove("version")
    with pytest.raises(AssertionError, match="Additional properties"):
        await api.raw.get("/healthz")  # a key the document does not name
    _forget(api, 2)


async def test_an_undocumented_status_and_path_fail(api: ApiClient) -> None:
    del _document(api)["paths"]["/api/operator/chat"]["post"]["responses"]["400"]
    with pytest.raises(AssertionError, match="status 400 is not documented"):
        await api.post("/api/operator/chat", json={})
    del _document(api)["paths"]["/api/operator/chat/sessions"]
    with pytest.raises(AssertionError, match="no operation in the document"):
        await api.get("/api/operator/chat/sessions")
    _forget(api, 2)
    assert (await api.get("/api/operator/nothing-here")).status == 404  # the router's answer


async def test_a_stream_frame_that_breaks_its_schema_fails(api: ApiClient) -> None:
    frame = _document(api)["components"]["schemas"]["Frame"]
    done = {"$ref": "#/components/schemas/DoneFrame"}
    frame["anyOf"] = [kind for kind in frame["anyOf"] if kind != done]  # no done
    response = await api.post("/api/operator/chat/stream", json={"message": "hello"})
    with pytest.raises(AssertionError, match="frame done"):
        await read_sse(response)
        # A reader that stops at the done frame's data line may not have seen the blank
        # line that ends it: the check still sees that frame (the teardown flushes too).
        api.contract.flush()
    _forget(api, 1)


async def test_a_stored_messages_meta_is_checked_key_by_key(api: ApiClient) -> None:
    """`meta` is described by its TypedDict (bot.contracts.turn_meta.TurnMeta), not as any
    object: a key of another type than the document says fails."""
    meta = _document(api)["components"]["schemas"]["TurnMeta"]
    meta["properties"]["model"] = {"type": "integer"}
    with pytest.raises(AssertionError, match="model"):
        response = await api.post("/api/operator/chat", json={"message": "hello"})
        await response.json()
    _forget(api, 1)


async def test_the_tui_clients_answers_are_checked_too(api: ApiClient) -> None:
    sessions = _document(api)["components"]["schemas"]["Sessions"]
    sessions["properties"]["sessions"] = {"type": "string"}
    client = api.operator_client()
    try:
        with pytest.raises(AssertionError, match="sessions"):
            await client.sessions()
    finally:
        await client.close()
    _forget(api, 1)


async def test_the_reference_page_renders_the_document(api: ApiClient) -> None:
    response = await api.raw.get("/api/docs")
    page = await response.text()
    assert response.status == 200 and response.content_type == "text/html"
    assert "/api/operator/chat/stream" in page and "previous_session" in page
    assert "<script" not in page and "http" not in page.replace("/api/openapi.json", "")


async def test_an_answer_found_valid_is_checked_again_once_the_document_changes(
    api: ApiClient,
) -> None:
    """The check keeps what it compiled (tests/api_contract.py) per state of the document: a
    change to a schema is not hidden by an earlier pass."""
    for _ in range(2):
        assert (await api.raw.get("/healthz")).status == 200  # the second one compiled already
    _document(api)["components"]["schemas"]["Health"]["properties"]["version"] = {"type": "integer"}
    with pytest.raises(AssertionError, match="version"):
        await api.raw.get("/healthz")
    _forget(api, 1)
