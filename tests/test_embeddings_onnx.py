"""The `onnx` embeddings provider (bot/chat/embeddings_onnx.py): an encoder exported to ONNX,
from a directory the operator names, run in-process by ONNX Runtime, offline. Tested with a
tiny random-weights BERT built in the test's temp dir (tests/fakes/tiny_encoder.py), never
with real weights: what is tested is the plumbing (tokenise, pad, mask, pool, normalise, the
settings, the dense round through a real chat turn), not what a real model finds."""

from __future__ import annotations

import json
import logging
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import onnxruntime  # the optional extra `onnx`; the dev extra has it, so a test never skips
import pytest

import bot.chat.embeddings_onnx
from bot.chat.embeddings_onnx import OnnxEmbeddings
from bot.config import Settings
from bot.config_models import EmbeddingsSettings
from bot.config_values import ConfigError
from memory import ChunkIn
from memory.dense import META
from tests.conftest import make_settings
from tests.fakes import tiny_encoder
from tests.test_grounding_hybrid import (
    CHUNKS,
    NOISE,
    REPO,
    _api,
    _connections,
    _dense,
    _local_address,
    _rounds,
    _turn,
)

TEXTS = [
    "The export job times out on large ledgers.",
    "why",
    "A doctor sees kids with a high temperature, and the broker restarts at night.",
    "",
    "login page needs a review",
]


@pytest.fixture
def model_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setattr(bot.chat.embeddings_onnx, "_models", {})
    return tiny_encoder.write(tmp_path / "encoder")


def _hidden(directory: Path, text: str) -> np.ndarray:
    """The encoder's last hidden state for one text, unpadded: the reference the provider's
    pooling is checked against (computed here without the provider's code)."""
    from tokenizers import Tokenizer

    ids = np.asarray([Tokenizer.from_file(str(directory / "tokenizer.json")).encode(text).ids])
    session = onnxruntime.InferenceSession(str(directory / "model.onnx"))
    feed = {"input_ids": ids, "attention_mask": np.ones_like(ids), "token_type_ids": 0 * ids}
    return np.asarray(session.run(None, feed)[0][0])


def _unit(vector: np.ndarray) -> np.ndarray:
    return vector / np.linalg.norm(vector)


def test_rows_are_the_masked_mean_of_each_texts_own_tokens(model_dir: Path) -> None:
    """A batch of texts of different lengths (padded together) gives each text the vector it
    has alone: the mean of its own tokens' hidden states, L2-normalised, in input order."""
    rows = OnnxEmbeddings(str(model_dir)).embed(TEXTS)
    assert rows.shape == (len(TEXTS), tiny_encoder.WIDTH) and rows.dtype == np.float32
    for row, text in zip(rows, TEXTS, strict=True):
        expected = _unit(_hidden(model_dir, text).mean(axis=0))
        assert np.allclose(row, expected, atol=1e-5), text
    assert np.allclose(np.linalg.norm(rows, axis=1), 1.0, atol=1e-6)
    assert bot.chat.embeddings_onnx.loaded() == [str(model_dir)]


def test_a_batch_larger_than_one_inference_call_keeps_the_order(model_dir: Path) -> None:
    texts = [" ".join(tiny_encoder.WORDS[: 1 + (n * 7) % 40]) for n in range(75)]
    model = OnnxEmbeddings(str(model_dir))
    rows = model.embed(texts)
    alone = np.vstack([model.embed([text]) for text in texts[::10]])
    assert np.allclose(rows[::10], alone, atol=1e-5)


def test_the_pooling_and_length_configs_are_read(tmp_path: Path) -> None:
    """sentence-transformers' configs: `pooling_mode_cls_token` takes the [CLS] token's state;
    `max_seq_length` cuts a text (its [CLS] and [SEP] included) as sentence-transformers does."""
    cls = tiny_encoder.write(tmp_path / "cls", pooling="cls")
    row = OnnxEmbeddings(str(cls)).embed([TEXTS[2]])[0]
    assert np.allclose(row, _unit(_hidden(cls, TEXTS[2])[0]), atol=1e-5)

    short = tiny_encoder.write(tmp_path / "short", max_seq_length=6)
    words = "the export job times out on large ledgers"
    cut = OnnxEmbeddings(str(short)).embed([words, "the export job times"])
    assert np.allclose(cut[0], cut[1], atol=1e-6)  # 4 words + [CLS] + [SEP] = 6


def test_settings_name_the_directory_and_stop_start_up_when_it_is_wrong(model_dir: Path) -> None:
    env = {"STEELFRAME_CHAT_EMBEDDINGS": "onnx", "STEELFRAME_CHAT_EMBEDDINGS_MODEL": ""}
    with pytest.raises(ConfigError, match="STEELFRAME_CHAT_EMBEDDINGS_MODEL: required"):
        Settings.from_env(env).embeddings()
    env["STEELFRAME_CHAT_EMBEDDINGS_MODEL"] = str(model_dir.parent)
    with pytest.raises(ConfigError, match=r"has no model\.onnx or tokenizer\.json"):
        Settings.from_env(env).embeddings()
    env["STEELFRAME_CHAT_EMBEDDINGS_MODEL"] = str(model_dir / ".." / model_dir.name)
    assert Settings.from_env(env).embeddings() == EmbeddingsSettings(
        "onnx", str(model_dir.resolve()), "", None
    )


async def test_the_dense_round_runs_offline_through_a_chat_turn(
    api_factory: Any, tmp_path: Path, model_dir: Path
) -> None:
    """The tiny model loaded inside the test while an audit hook records every socket the
    process dials: none leaves this machine. Its random weights find nothing on purpose, so
    what is checked is that the round ran on its vectors and stored them."""
    settings = make_settings(tmp_path, chat_embeddings="onnx", chat_embeddings_model=str(model_dir))
    extra = ChunkIn("The export job times out on large ledgers.", "comment", REPO, issue=7)
    _connections.append([])
    try:
        api = await _api(api_factory, settings, chunks=[*NOISE, extra])
        response, statuses = await _turn(api, "why does the export job time out?")
    finally:
        dialled = _connections.pop()
    assert dialled and [a for a in dialled if not _local_address(a)] == []
    assert bot.chat.embeddings_onnx.loaded() == [str(model_dir)]
    dense = _dense(await _rounds(api, response))
    assert "unavailable" not in dense and dense["embedded"] == CHUNKS
    assert dense["dense_model"] == str(model_dir)
    assert any(s.startswith("retrieve 2/4 · ") for s in statuses)
    meta = json.loads((settings.data_dir / "memory" / "dense" / META).read_text())
    assert (meta["provider"], meta["dimension"]) == ("onnx", tiny_encoder.WIDTH)


async def test_a_model_that_cannot_load_leaves_the_lexical_rounds(
    api_factory: Any, tmp_path: Path, model_dir: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """Settings checked at start-up; the file broken since: the turn keeps its lexical hits
    and says why the dense round is missing, naming the model by its directory's last part
    as the status line does when it works (ONNX Runtime's own message names the file by its
    whole path); the whole path is in the server log, for the operator."""
    settings = make_settings(tmp_path, chat_embeddings="onnx", chat_embeddings_model=str(model_dir))
    (model_dir / "model.onnx").write_bytes(b"not a model")
    lexical = ChunkIn("The export job times out on large ledgers.", "comment", REPO, issue=7)
    api = await _api(api_factory, settings, chunks=[*NOISE, lexical])
    with caplog.at_level(logging.WARNING, logger="bot.chat.embeddings_onnx"):
        response, statuses = await _turn(api, "why does the export job time out?")
    assert any(h["text"] == lexical.text and h["round"] == "message" for h in response["retrieved"])
    dense = _dense(await _rounds(api, response))
    assert dense["hits"] == 0
    said = f"the onnx embeddings model {model_dir.name} failed ("
    assert said in dense["unavailable"] and str(tmp_path) not in dense["unavailable"]
    unavailable = [s for s in statuses if "dense ranking unavailable" in s]
    assert len(unavailable) == 1 and said in unavailable[0]
    assert not [s for s in statuses if str(tmp_path) in s], statuses
    logged = [r.getMessage() for r in caplog.records if r.name == "bot.chat.embeddings_onnx"]
    assert any(str(model_dir) in message for message in logged), logged


def test_start_up_never_imports_onnxruntime() -> None:
    """The service's parts, the client and the provider's module import without it (it is an
    optional extra); only a turn with `onnx` on loads it."""
    probe = (
        "import sys, steelframe.parts, bot.chat.embeddings, bot.chat.embeddings_onnx\n"
        "print('onnxruntime' in sys.modules, 'tokenizers' in sys.modules)\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, timeout=60, check=True
    )
    assert result.stdout.strip().splitlines()[-1] == "False False"


def test_the_cost_benchmark_runs(capsys: pytest.CaptureFixture[str]) -> None:
    """bench/embeddings_onnx.py on the tiny model: both providers measured, ratios printed."""
    from bench import embeddings_onnx

    embeddings_onnx.main(["--smoke"])
    out = capsys.readouterr().out
    assert "| local | 1 | 256 |" in out and "| onnx | 2 | 16 |" in out
    assert "installed MB: onnxruntime" in out
