"""The model searches too (issue 31): with a model configured and model search words on, a
short rewrite step asks the model (here a local OpenAI-compatible server speaking the real
wire format) for the words the answer would contain, and rounds 2 and 3 search with them, so
a paraphrase no table bridges is found."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from bot.chat.search_words import INSTRUCTIONS, parse
from bot.config import Settings
from bot.config_values import Secret
from memory import ChunkIn
from tests.conftest import ApiClient, make_settings, read_sse
from tests.fakes.openai_server import FakeOpenAI, HttpError, answer

KEY = "sk-test-model-words-0123456789"
TRAILER = 'STEELFRAME_META: {"intent": "answer"}'
REPO = "steelframe-dev/sandbox"
QUESTION = "Why were all the gadgets kicked off the hub before dawn?"
ANSWER_CHUNK = (
    "@yusuf on #15:\ncert-manager renews the broker's TLS certificate every night and the"
    " listener restarts to load it."
)
NOISE = [
    ChunkIn(f"#{n} {topic} needs a review\n\nSee the {topic} notes.", "issue", REPO, issue=n)
    for n, topic in enumerate(["login page", "export job", "search box", "footer"], start=100)
]


@pytest.fixture
def fake() -> FakeOpenAI:
    return FakeOpenAI(api_key=KEY)


async def _api(
    api_factory: Any, fake: FakeOpenAI, aiohttp_server: Any, tmp_path: Path, *, on: bool
) -> ApiClient:
    server = await aiohttp_server(fake.app())
    settings: Settings = make_settings(
        tmp_path,
        runtime="openai",
        model="gpt-test",
        openai_base_url=str(server.make_url("/v1")),
        openai_api_key=Secret(KEY),
        chat_model_search_words=on,
    )
    api: ApiClient = await api_factory(settings)
    assert api.services.memory is not None
    api.services.memory.add([*NOISE, ChunkIn(ANSWER_CHUNK, "comment", REPO, issue=15)])
    return api


def test_only_words_are_taken_from_the_models_line() -> None:
    assert parse("retrieve: broker certificate renewal, listener restart") == (
        "broker",
        "certificate",
        "renewal",
        "listener",
        "restart",
    )
    assert parse("Sure!\nretrieve: a " + " ".join(f"w{i}" for i in range(30))) == tuple(
        f"w{i}" for i in range(12)
    )
    assert parse("") == ()


async def test_the_models_search_words_find_a_paraphrase(
    api_factory: Any, fake: FakeOpenAI, aiohttp_server: Any, tmp_path: Path
) -> None:
    fake.enqueue(
        "gpt-test",
        answer("retrieve: broker TLS certificate renewal listener restarts nightly"),
        answer(f"Per the comment on #15, the certificate renewal restarts it.\n{TRAILER}"),
    )
    api = await _api(api_factory, fake, aiohttp_server, tmp_path, on=True)
    response = await api.post("/api/operator/chat/stream", json={"message": QUESTION})
    frames = await read_sse(response)
    done = frames[-1]["response"]
    found = [h for h in done["retrieved"] if h["text"] == ANSWER_CHUNK]
    assert found and found[0]["round"] == "model"
    rewrite = fake.requests[0].body["messages"]
    assert rewrite[0]["content"] == INSTRUCTIONS and rewrite[-1]["content"] == QUESTION
    statuses = [f["text"] for f in frames if f["type"] == "status"]
    assert any("model words: broker TLS certificate" in text for text in statuses)
    assert done["memory_verdict"] == "answers"  # the thread holds the model's words


async def test_without_the_setting_or_when_the_model_fails_the_rounds_go_on(
    api_factory: Any, fake: FakeOpenAI, aiohttp_server: Any, tmp_path: Path
) -> None:
    fake.enqueue(
        "gpt-test",
        HttpError(500, "upstream down", "server_error"),
        answer(f"Nothing on this.\n{TRAILER}"),
    )
    api = await _api(api_factory, fake, aiohttp_server, tmp_path, on=True)
    done = await (await api.post("/api/operator/chat", json={"message": QUESTION})).json()
    assert done["reply"] == "Nothing on this."
    assert not any(h["round"] == "model" for h in done["retrieved"])
    assert len(fake.requests) == 2  # the failed rewrite, then the turn's own draft
