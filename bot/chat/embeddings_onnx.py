"""The `onnx` embeddings provider (STEELFRAME_CHAT_EMBEDDINGS=onnx): a sentence-transformers
style encoder exported to ONNX, from a directory the operator names, run in this process by
ONNX Runtime with the Hugging Face `tokenizers` package (no torch, no server, no network).

The directory holds `model.onnx` (a BERT-style encoder: inputs `input_ids`, `attention_mask`
and optionally `token_type_ids`; first output the last hidden state, [batch, tokens, width])
and `tokenizer.json`; optionally sentence-transformers' `sentence_bert_config.json`
(`max_seq_length`) and `1_Pooling/config.json` (`pooling_mode_cls_token`). A text's vector
is what sentence-transformers computes for such a model: the mean of its tokens' last hidden
states under the attention mask (or the [CLS] token's when the pooling config says so), L2
normalised. No weights ship with Steelframe: bench/HISTORY.md ("A trustworthy offline
source ...") found no registry package from a model's authors that holds them.

Why ONNX Runtime: the same vectors as torch (bench/embeddings_onnx.py checks the cosine), a
little faster on one thread, at a tenth of its install size (72 MB against torch 2.13 CPU's
754 MB, plus transformers' 130), and well kept. Both packages are the optional extra `onnx`
(pyproject.toml), imported only by `_open`, which only a turn with the provider on reaches.

Loaded lazily, once per process and directory, on a worker thread; each call embeds on a
worker thread too. One lock serialises loading and embedding. Texts are embedded in batches
of similar length, so a short chunk does not pay for a long one's padding, and of bounded
size, so a backlog of long chunks does not hold its peak memory for the life of the process.

Loading first takes a digest of the files the provider reads (`model_digest`): memory.dense
keys the stored vectors by what the model is, not where it lies, so new files in the same
directory embed every chunk again and the same files in another directory keep them. The
digest reads every byte once, in 1 MiB chunks: 0.1 to 0.25 s for a file the size of
all-MiniLM-L6-v2's model.onnx (90 MB) on the shared 2-core machine at a load average of 11,
once per process, beside the second or so ONNX Runtime takes to load it.

A failure's message names the model by its directory's last part (`name`, `shown`), as the
status line does; the whole path, where this machine keeps it, goes to the server log.
"""

from __future__ import annotations

import hashlib
import importlib
import json
import logging
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path, PurePath
from typing import Any

import numpy as np
from numpy.typing import NDArray

from bot.config_models import ONNX_FILES

log = logging.getLogger(__name__)

MODEL_FILE, TOKENIZER_FILE = ONNX_FILES
LENGTH_CONFIG = "sentence_bert_config.json"
POOLING_CONFIG = "1_Pooling/config.json"
# Every file the provider reads, required or optional: what the model's digest covers.
MODEL_FILES = (*ONNX_FILES, LENGTH_CONFIG, POOLING_CONFIG)
DIGEST_CHUNK = 1 << 20  # bytes hashed a read: a 90 MB model.onnx is never held whole
DEFAULT_MAX_TOKENS = 256  # sentence-transformers' max_seq_length for MiniLM; the config wins
# Tokens per inference call (texts x the longest one's tokens): bounds the attention's memory
# (batch x heads x tokens^2 floats: ~25 MB for MiniLM at 8 x 256 tokens), which ONNX
# Runtime's arena would otherwise keep at its peak (bench/README.md, "The onnx provider").
TOKENS_PER_CALL = 2_048
# One intra-op thread: the service embeds on a worker thread beside its event loop and its
# other workers; bench/README.md ("The onnx provider") measures one against two.
THREADS = 1


@dataclass(frozen=True)
class _Model:
    session: Any  # onnxruntime.InferenceSession
    tokenizer: Any  # tokenizers.Tokenizer
    inputs: frozenset[str]
    cls_pooling: bool
    digest: str  # what the model is (model_digest): memory.dense keys its vectors by it


_models: dict[str, _Model] = {}
_lock = threading.Lock()


class OnnxEmbeddings:
    """One ONNX encoder of this process, by its directory."""

    def __init__(self, directory: str, *, threads: int = THREADS) -> None:
        self.directory = directory
        self.threads = threads

    @property
    def name(self) -> str:
        """The model as the operator's status names it: its directory's last part."""
        return PurePath(self.directory).name or self.directory

    def shown(self, text: str) -> str:
        """`text` (a failure's message) with the model's directory named by its last part:
        ONNX Runtime's own messages name the file by its whole path."""
        return text.replace(self.directory, self.name)

    def embed(self, texts: Sequence[str]) -> NDArray[np.float32]:
        """One L2-normalised row per text, in order (blocking: call it on a worker thread).
        Any failure (onnxruntime missing, a file missing, a model of another shape)
        propagates for the client to word; one to load is logged with the whole path."""
        with _lock:
            return _embed(self._model(), list(texts))

    def identity(self) -> str:
        """What the model is, for memory.dense's key: the digest of its files, taken when
        it loaded (blocking: the first call loads it, on a worker thread)."""
        model = _models.get(self.directory)  # loaded: no wait behind a backfill's batch
        if model is None:
            with _lock:
                model = self._model()
        return model.digest

    def _model(self) -> _Model:
        """The loaded model (the caller holds _lock)."""
        model = _models.get(self.directory)
        if model is not None:
            return model
        try:
            model = _models[self.directory] = _open(Path(self.directory), self.threads)
        except Exception as exc:  # the operator's log names the path; the status, the name
            log.warning("onnx embeddings model in %s failed to load: %r", self.directory, exc)
            raise
        return model


def model_digest(directory: Path) -> str:
    """sha256 over the files the provider reads (MODEL_FILES), each by its path in the
    directory and its own sha256 ("absent" for an optional config that is not there): the
    same files anywhere give the same digest, any changed byte another."""
    digest = hashlib.sha256()
    for name in MODEL_FILES:
        path = directory / name
        digest.update(f"{name}\0{_file_digest(path) if path.is_file() else 'absent'}\n".encode())
    return f"sha256:{digest.hexdigest()}"


def _file_digest(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        while chunk := handle.read(DIGEST_CHUNK):
            digest.update(chunk)
    return digest.hexdigest()


def _open(directory: Path, threads: int) -> _Model:
    ort = importlib.import_module("onnxruntime")
    tokenizers = importlib.import_module("tokenizers")
    absent = [name for name in ONNX_FILES if not (directory / name).is_file()]
    if absent:  # checked at start-up too (bot.config_models); moved or deleted since
        raise FileNotFoundError(f"{directory} has no {' or '.join(absent)}")
    # Before the files are read for use: files replaced while this runs give a digest of
    # the old ones, so the next load, seeing the new ones, embeds everything again (taken
    # after, old vectors could be kept under the new files' digest).
    started = time.perf_counter()
    digest = model_digest(directory)
    hashed_ms = (time.perf_counter() - started) * 1000
    tokenizer = tokenizers.Tokenizer.from_file(str(directory / TOKENIZER_FILE))
    tokenizer.enable_truncation(max_length=_max_tokens(directory))
    tokenizer.no_padding()  # padding is per batch, below
    options = ort.SessionOptions()
    options.intra_op_num_threads = threads
    options.inter_op_num_threads = 1
    session = ort.InferenceSession(
        str(directory / MODEL_FILE), sess_options=options, providers=["CPUExecutionProvider"]
    )
    inputs = frozenset(i.name for i in session.get_inputs())
    if not {"input_ids", "attention_mask"} <= inputs:
        raise ValueError(f"{MODEL_FILE} takes {sorted(inputs)}, not input_ids and attention_mask")
    log.info(
        "onnx embeddings model loaded from %s (%s, hashed in %.0f ms)", directory, digest, hashed_ms
    )
    return _Model(session, tokenizer, inputs, _cls_pooling(directory), digest)


def _max_tokens(directory: Path) -> int:
    config = _json(directory / LENGTH_CONFIG)
    value = config.get("max_seq_length")
    return value if isinstance(value, int) and value > 0 else DEFAULT_MAX_TOKENS


def _cls_pooling(directory: Path) -> bool:
    config = _json(directory / POOLING_CONFIG)
    return bool(config.get("pooling_mode_cls_token")) and not config.get("pooling_mode_mean_tokens")


def _json(path: Path) -> dict[str, Any]:
    if not path.is_file():
        return {}
    loaded = json.loads(path.read_text(encoding="utf-8"))
    return loaded if isinstance(loaded, dict) else {}


def _embed(model: _Model, texts: list[str]) -> NDArray[np.float32]:
    encodings = model.tokenizer.encode_batch(texts)
    ids = [np.asarray(e.ids, dtype=np.int64) for e in encodings]
    rows: list[NDArray[np.float32]] = [np.zeros(0, np.float32)] * len(ids)
    for batch in _batches(sorted(range(len(ids)), key=lambda i: len(ids[i])), ids):
        for index, row in zip(batch, _run(model, [ids[i] for i in batch]), strict=True):
            rows[index] = row
    return np.vstack(rows) if rows else np.zeros((0, 0), np.float32)


def _batches(order: list[int], ids: list[NDArray[np.int64]]) -> list[list[int]]:
    """Indices, shortest text first, in runs whose padded size stays under TOKENS_PER_CALL
    (a text longer than that alone is a run of its own)."""
    batches: list[list[int]] = []
    current: list[int] = []
    for index in order:  # ascending length: the newest text is the longest of its run
        if current and (len(current) + 1) * len(ids[index]) > TOKENS_PER_CALL:
            batches.append(current)
            current = []
        current.append(index)
    return [*batches, current] if current else batches


def _run(model: _Model, ids: list[NDArray[np.int64]]) -> NDArray[np.float32]:
    width = max(len(row) for row in ids)
    input_ids = np.zeros((len(ids), width), np.int64)  # 0 is BERT's [PAD]; masked out anyway
    mask = np.zeros((len(ids), width), np.int64)
    for i, row in enumerate(ids):
        input_ids[i, : len(row)] = row
        mask[i, : len(row)] = 1
    feed = {"input_ids": input_ids, "attention_mask": mask}
    if "token_type_ids" in model.inputs:
        feed["token_type_ids"] = np.zeros_like(input_ids)
    hidden = np.asarray(model.session.run(None, feed)[0], dtype=np.float32)
    if hidden.ndim != 3:
        raise ValueError(f"{MODEL_FILE}'s first output has shape {hidden.shape}, not 3-D")
    if model.cls_pooling:
        pooled = hidden[:, 0, :]
    else:
        weights = mask[:, :, None].astype(np.float32)
        pooled = (hidden * weights).sum(axis=1) / np.maximum(weights.sum(axis=1), 1e-9)
    norms = np.linalg.norm(pooled, axis=1, keepdims=True)
    normalised: NDArray[np.float32] = (pooled / np.maximum(norms, 1e-12)).astype(np.float32)
    return normalised


def loaded() -> list[str]:
    """The directories this process has loaded (for tests and diagnostics)."""
    with _lock:
        return sorted(_models)
