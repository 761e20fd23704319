"""The `onnx` provider's stored vectors are keyed by what the model is, not where it lies
(bot/chat/embeddings_onnx.py `model_digest`, memory.dense's key): new files in the same
directory embed every chunk again; the same files in another directory keep the vectors.
Tiny random-weights encoders (tests/fakes/tiny_encoder.py), real chat turns, offline; a
restart is a new app over the same data dir with the process's loaded models forgotten."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest

import bot.chat.embeddings_onnx
from bot.chat.embeddings_onnx import OnnxEmbeddings, model_digest
from bot.config import Settings
from memory import ChunkIn
from memory.dense import META
from tests.conftest import make_settings
from tests.fakes import tiny_encoder
from tests.test_grounding_hybrid import CHUNKS, NOISE, REPO, _api, _dense, _rounds, _turn

QUESTION = "why does the export job time out?"
EXTRA = ChunkIn("The export job times out on large ledgers.", "comment", REPO, issue=7)


@pytest.fixture
def models(monkeypatch: pytest.MonkeyPatch) -> dict[str, Any]:
    """This test's loaded models (a fresh cache, cleared to stand for a restart)."""
    loaded: dict[str, Any] = {}
    monkeypatch.setattr(bot.chat.embeddings_onnx, "_models", loaded)
    return loaded


def _settings(tmp_path: Path, directory: Path) -> Settings:
    return make_settings(tmp_path, chat_embeddings="onnx", chat_embeddings_model=str(directory))


async def _embedded(api_factory: Any, settings: Settings, **more: Any) -> int:
    """A turn on a fresh app over the settings' data dir: the chunks its dense round embedded."""
    api = await _api(api_factory, settings, **more)
    response, _ = await _turn(api, QUESTION)
    dense = _dense(await _rounds(api, response))
    assert "unavailable" not in dense, dense
    embedded: int = dense["embedded"]
    return embedded


def _stored_model(settings: Settings) -> str:
    meta = json.loads((settings.data_dir / "memory" / "dense" / META).read_text())
    model: str = meta["model"]
    return model


async def test_new_model_files_in_the_same_directory_embed_every_chunk_again(
    api_factory: Any, tmp_path: Path, models: dict[str, Any]
) -> None:
    directory = tiny_encoder.write(tmp_path / "models" / "encoder", seed=7)
    settings = _settings(tmp_path, directory)
    assert await _embedded(api_factory, settings, chunks=[*NOISE, EXTRA]) == CHUNKS
    first = _stored_model(settings)
    assert first == model_digest(directory)

    # the operator replaces the weights in place (same width, so no dimension change would
    # tell) and restarts: every chunk is embedded again, under the new files' digest
    tiny_encoder.write(directory, seed=8)
    models.clear()
    assert await _embedded(api_factory, settings) == CHUNKS
    assert _stored_model(settings) == model_digest(directory) != first


async def test_the_same_model_files_in_another_directory_keep_the_vectors(
    api_factory: Any, tmp_path: Path, models: dict[str, Any]
) -> None:
    directory = tiny_encoder.write(tmp_path / "models" / "encoder", seed=7, pooling="mean")
    settings = _settings(tmp_path, directory)
    assert await _embedded(api_factory, settings, chunks=[*NOISE, EXTRA]) == CHUNKS
    stored = _stored_model(settings)

    # the model moved (a new disk, a renamed folder): nothing is embedded again
    moved = tmp_path / "elsewhere" / "all-the-same"
    shutil.copytree(directory, moved)
    shutil.rmtree(directory)
    models.clear()
    assert await _embedded(api_factory, _settings(tmp_path, moved)) == 0
    assert _stored_model(settings) == stored
    assert bot.chat.embeddings_onnx.loaded() == [str(moved.resolve())]


def test_the_digest_covers_every_file_the_provider_reads(tmp_path: Path) -> None:
    """The model, the tokenizer and both optional configs (present or not) make the
    digest; the directory's path does not."""
    one = tiny_encoder.write(tmp_path / "one")
    assert model_digest(one) == model_digest(tiny_encoder.write(tmp_path / "two"))
    seen = {model_digest(one)}
    for change in (
        lambda: tiny_encoder.write(one, max_seq_length=64),
        lambda: tiny_encoder.write(one, max_seq_length=64, pooling="cls"),
        lambda: (one / "tokenizer.json").write_text(
            (one / "tokenizer.json").read_text().replace('"[UNK]"', '"[UNKNOWN]"')
        ),
        lambda: tiny_encoder.write(one, seed=9, max_seq_length=64, pooling="cls"),
    ):
        change()
        seen.add(model_digest(one))
    assert len(seen) == 5


def test_the_provider_answers_its_models_digest_and_names_it_by_its_directory(
    tmp_path: Path, models: dict[str, Any]
) -> None:
    directory = tiny_encoder.write(tmp_path / "models" / "encoder")
    provider = OnnxEmbeddings(str(directory))
    assert provider.identity() == model_digest(directory)  # loads it
    assert provider.name == "encoder"
    assert provider.shown(f"Load model from {directory}/model.onnx failed") == (
        "Load model from encoder/model.onnx failed"
    )
