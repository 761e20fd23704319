"""A `status` frame's `reason` is one of the words the chat contracts declare (StatusReason,
bot/contracts/chat.py; the clients' copies are generated from it): a retrieval or a dense
round that could not run says so with its word, and why in words in `detail` (the error's
class and first line), never with the error's text as the reason. Real chat turns over the
operator API, a real Memory (a corrupt index), an embeddings provider that refuses."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from bot.config_values import Secret
from bot.contracts.chat import StatusReason
from memory import ChunkIn
from memory.manifest import MANIFEST
from tests.conftest import ApiClient, make_settings, read_sse
from tests.fakes.ports import refused_port

REPO = "steelframe-dev/sandbox"


async def _statuses(api: ApiClient, message: str) -> list[dict[str, Any]]:
    response = await api.post("/api/operator/chat/stream", json={"message": message})
    frames = await read_sse(response)
    assert frames[-1]["type"] == "done", frames[-1]
    return [f for f in frames if f["type"] == "status"]


async def test_a_failed_retrieval_says_its_word_and_why_in_detail(api: ApiClient) -> None:
    memory = api.services.memory
    assert memory is not None
    memory.add([ChunkIn("something worth retrieving about deploys", "note", REPO)])
    (memory.root / MANIFEST).write_text("{corrupt")
    said = [f for f in await _statuses(api, "tell me about deploys") if "reason" in f]
    assert [(f["text"], f["reason"]) for f in said] == [
        ("retrieve unavailable", StatusReason.RETRIEVE_UNAVAILABLE.value)
    ]
    assert said[0]["detail"].startswith("IndexCorrupt"), said[0]


async def test_a_dense_round_that_could_not_run_says_its_word_and_why_in_detail(
    api_factory: Any, tmp_path: Path
) -> None:
    settings = make_settings(
        tmp_path,
        chat_embeddings="openai",
        chat_embeddings_model="embed-a",
        openai_base_url=f"http://127.0.0.1:{refused_port()}/v1",
        openai_api_key=Secret("sk-test-embeddings-0123456789"),
    )
    api: ApiClient = await api_factory(settings)
    assert api.services.memory is not None
    api.services.memory.add([ChunkIn("The export job times out on large ledgers.", "note", REPO)])
    said = [f for f in await _statuses(api, "why does the export job time out?") if "reason" in f]
    assert [f["reason"] for f in said] == [StatusReason.DENSE_UNAVAILABLE.value], said
    assert "dense ranking unavailable" in said[0]["text"]
    assert "cannot reach" in said[0]["detail"], said[0]
