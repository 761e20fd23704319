"""bench/embeddings_server.py, the server a real embedding model is measured through (bench/
HISTORY.md, "all-MiniLM-L6-v2 through the dense round"). torch and sentence-transformers are
not in the project's venv (the server runs from a scratch venv that has them), so the model
here is a small stand-in of the shape the server holds a SentenceTransformer to
(`SentenceModel`); the server, its HTTP answers and the product's own client
(bot.chat.embeddings, provider `openai`) are real."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import aiohttp
import numpy as np
import pytest

from bench.embeddings_server import Encoder, app
from bot.chat.embeddings import EmbeddingsClient
from bot.config_models import EmbeddingsSettings

LETTERS = "abcdefghijklmnopqrstuvwxyz"


class LetterCounts:
    """A text's letter counts plus a constant, normalised: same text, same vector."""

    max_seq_length = 256

    def __init__(self) -> None:
        self.encoded: list[list[str]] = []

    def encode(self, sentences: list[str], *, batch_size: int, normalize_embeddings: bool) -> Any:
        self.encoded.append(list(sentences))
        rows = np.array([[s.count(c) for c in LETTERS] + [1] for s in sentences], np.float32)
        return rows / np.linalg.norm(rows, axis=1, keepdims=True)

    def tokenize(self, texts: list[str]) -> dict[str, Any]:
        return {"attention_mask": np.array([len(t.split()) for t in texts])}


async def test_the_products_client_reads_unit_vectors_in_order_and_the_cache_spares_the_model(
    aiohttp_server: Any,
) -> None:
    model = LetterCounts()
    server = await aiohttp_server(app(Encoder(model, "mini", cache=True)))
    where = EmbeddingsSettings("openai", "mini", str(server.make_url("/v1")), None)
    async with aiohttp.ClientSession() as session:
        client = EmbeddingsClient(where, lambda: session)
        rows = await client.embed(["abc", "zzz", "abc"])
        again = await client.embed(["zzz"])
    assert rows.shape == (3, len(LETTERS) + 1)
    assert np.allclose(np.linalg.norm(rows, axis=1), 1.0)
    assert np.array_equal(rows[0], rows[2]) and not np.allclose(rows[0], rows[1])
    assert np.array_equal(again[0], rows[1])
    assert model.encoded == [["abc", "zzz"]]  # each text once; "zzz" the second time remembered


async def test_a_single_string_is_one_input_and_a_bad_request_is_400(aiohttp_server: Any) -> None:
    server = await aiohttp_server(app(Encoder(LetterCounts(), "mini")))
    async with aiohttp.ClientSession() as session:
        url = server.make_url("/v1/embeddings")
        async with session.post(url, json={"model": "m", "input": "one two"}) as response:
            body = await response.json()
        assert response.status == 200 and body["object"] == "list" and body["model"] == "m"
        assert [d["index"] for d in body["data"]] == [0] and body["data"][0][
            "object"
        ] == "embedding"
        assert body["usage"] == {"prompt_tokens": 2, "total_tokens": 2}
        for bad in (b'{"input": 3}', b'{"input": []}', b"not json", b"[1]"):
            async with session.post(url, data=bad) as response:
                error = (await response.json())["error"]
            assert response.status == 400 and error["type"] == "invalid_request_error", bad


def test_without_torch_it_says_what_to_install(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setitem(sys.modules, "torch", None)  # an import of it now fails, installed or not
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")  # load sets them; the test leaves them as found
    monkeypatch.setenv("TRANSFORMERS_OFFLINE", "1")
    with pytest.raises(SystemExit, match="needs torch and sentence-transformers"):
        Encoder.load(tmp_path, "mini", 0, cache=False)
