"""The `local` embeddings provider (STEELFRAME_CHAT_EMBEDDINGS=local): wordllama's static
embedding model, shipped inside its wheel, run in this process.

Why this one: a maintained package (PyPI `wordllama`) whose wheel carries a general-purpose
model (`l2_supercat`: 256 dimensions, 16 MB, token embeddings distilled from an LLM's and
average-pooled), so the dense round needs no server, no GPU and no network, and no
similarity is written by hand here. It is weaker than a hosted model on rare words.

Loaded lazily, once per process and model (about 1.2 s), on a worker thread; each call
embeds on a worker thread too (about 0.2 ms a text), so the event loop never waits on it.
One lock serialises loading and embedding (the tokenizer is shared).

Offline by construction: `cache_dir` is the package's own directory. wordllama looks for its
bundled tokenizer in `wordllama/tokenizer/` but ships it in `wordllama/tokenizers/`, which
it finds as `<cache_dir>/tokenizers/`; and `disable_download=True` turns a missing file
into a FileNotFoundError rather than a request to Hugging Face. wordllama is imported only
by `_open`, which only a turn with the provider on reaches: the CLI's start-up and a
service with it off never import it.
"""

from __future__ import annotations

import importlib
import logging
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Protocol

import numpy as np
from numpy.typing import NDArray

LOCAL_DIMENSIONS = 256  # the only size of l2_supercat that ships inside the wheel


class StaticModel(Protocol):
    """What this module uses of wordllama's WordLlamaInference."""

    def embed(self, texts: list[str], norm: bool = ...) -> NDArray[np.float32]: ...


_models: dict[str, StaticModel] = {}
_lock = threading.Lock()


class LocalEmbeddings:
    """One wordllama model of this process, by its config name."""

    def __init__(self, model: str) -> None:
        self.model = model

    def embed(self, texts: Sequence[str]) -> NDArray[np.float32]:
        """One row per text (blocking: call it on a worker thread). Any failure (wordllama
        missing, the model's files not in the wheel) propagates for the client to word."""
        with _lock:
            model = _models.get(self.model)
            if model is None:
                model = _models[self.model] = _open(self.model)
            rows = model.embed(list(texts), norm=False)
        return np.asarray(rows, dtype=np.float32)


def _open(name: str) -> StaticModel:
    root = logging.getLogger()
    handlers, level = list(root.handlers), root.level
    wordllama = importlib.import_module("wordllama")
    # Importing wordllama calls logging.basicConfig(level=INFO); the process's logging is
    # the service's own, so whatever that import added is taken back.
    root.handlers[:] = handlers
    root.setLevel(level)
    package = Path(str(wordllama.__file__)).parent
    model: StaticModel = wordllama.WordLlama.load(
        name, cache_dir=package, dim=LOCAL_DIMENSIONS, disable_download=True
    )
    return model


def loaded() -> list[str]:
    """The models this process has loaded (for tests and diagnostics)."""
    with _lock:
        return sorted(_models)
