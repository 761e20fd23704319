"""The dense round's status line names its embeddings model by what names it: with the `onnx`
provider the setting is the model's directory (an absolute path, bot/config_models.py), and
the line shows its last part; the round's meta keeps the whole path for the operator's logs.
Other providers' names are shown as set (bot.chat.embeddings EmbeddingsClient.model_name).
Tiny random-weights encoder (tests/fakes/tiny_encoder.py) or the fake OpenAI embeddings server
(tests/fakes/embeddings_server.py), a real chat turn, offline."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

import bot.chat.embeddings_onnx
from memory import ChunkIn
from tests.conftest import make_settings
from tests.fakes import tiny_encoder
from tests.fakes.embeddings_server import FakeEmbeddings
from tests.test_grounding_hybrid import (
    CONCEPTS,
    KEY,
    NOISE,
    REPO,
    _api,
    _dense,
    _rounds,
    _settings,
    _turn,
)

MODEL = "tiny-bert-onnx"


async def test_an_onnx_models_status_names_its_directory_not_its_path(
    api_factory: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(bot.chat.embeddings_onnx, "_models", {})
    model_dir = tiny_encoder.write(tmp_path / "models" / MODEL)
    settings = make_settings(tmp_path, chat_embeddings="onnx", chat_embeddings_model=str(model_dir))
    extra = ChunkIn("The export job times out on large ledgers.", "comment", REPO, issue=7)
    api = await _api(api_factory, settings, chunks=[*NOISE, extra])
    response, statuses = await _turn(api, "why does the export job time out?")
    dense = _dense(await _rounds(api, response))
    assert "unavailable" not in dense
    assert dense["dense_model"] == str(model_dir.resolve())  # the whole path, for the logs
    said = [s for s in statuses if s.startswith(f"retrieve {dense['round']}/")]
    assert len(said) == 1 and said[0].endswith(f" · fused with {MODEL} vectors"), statuses
    assert str(tmp_path) not in said[0]


async def test_another_providers_model_is_named_as_set_slash_and_all(
    api_factory: Any, aiohttp_server: Any, tmp_path: Path
) -> None:
    named = "org/embed-a"  # a `/` in an OpenAI-style model's name is part of it, not a path
    fake = FakeEmbeddings({named: CONCEPTS}, api_key=KEY)
    server = await aiohttp_server(fake.app())
    settings = _settings(tmp_path, str(server.make_url("/v1")), chat_embeddings_model=named)
    api = await _api(api_factory, settings, chunks=NOISE)
    response, statuses = await _turn(api, "why does the export job time out?")
    dense = _dense(await _rounds(api, response))
    assert "unavailable" not in dense and dense["dense_model"] == named
    said = [s for s in statuses if s.startswith(f"retrieve {dense['round']}/")]
    assert len(said) == 1 and said[0].endswith(f" · fused with {named} vectors"), statuses
