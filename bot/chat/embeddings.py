"""The embeddings client of the hybrid ranking (bot.chat.hybrid): text in, float32 rows out.

Two wire protocols, each a typed request and response:

- `openai` (OpenAI, vLLM, llama.cpp's server, LiteLLM, Ollama's `/v1`...):
  `POST {base}/embeddings {"model", "input": [text, ...]}` answers
  `{"object": "list", "data": [{"object": "embedding", "embedding": [...], "index": i}],
  "model", "usage"}`; rows are put back in input order by `index`.
- `ollama`: `POST {base}/api/embed {"model", "input": [text, ...]}` answers
  `{"model", "embeddings": [[...], ...], "total_duration", ...}` in input order.

And two in-process providers, embedded on a worker thread, never over the network, held to
the same timeout and checks: `local` (bot.chat.embeddings_local: wordllama's bundled model)
and `onnx` (bot.chat.embeddings_onnx: an ONNX encoder from a directory the operator names).

Every failure (refused, timed out, an HTTP error, an answer of the wrong shape or count)
is an `EmbeddingsUnavailable` whose message names the endpoint and the reason, never a key:
the caller keeps its lexical rounds and records the reason.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from typing import Protocol, TypeVar

import aiohttp
import msgspec
import numpy as np
from numpy.typing import NDArray

from bot.chat.embeddings_local import LocalEmbeddings
from bot.chat.embeddings_onnx import OnnxEmbeddings
from bot.config_models import EmbeddingsSettings
from bot.runtimes.transport import endpoint_label, failure_from_exception, failure_from_response

EMBEDDINGS_SECONDS = 10.0  # one embeddings call may take this long; the turn goes on without
TEXT_CHARS = 2_000  # of a chunk embedded (about 500 tokens: small models read 512)
Shape = TypeVar("Shape")


class InProcess(Protocol):
    """An in-process model (`local`, `onnx`): blocking, called on a worker thread."""

    def embed(self, texts: Sequence[str]) -> NDArray[np.float32]: ...


class EmbeddingsUnavailable(Exception):
    """The provider gave no usable vectors; the message says why (safe to show)."""


class OpenAIEmbeddingsRequest(msgspec.Struct, frozen=True):
    model: str
    input: list[str]


class OpenAIEmbedding(msgspec.Struct, frozen=True):
    embedding: list[float]
    index: int


class OpenAIEmbeddingsResponse(msgspec.Struct, frozen=True):
    data: list[OpenAIEmbedding]


class OllamaEmbedRequest(msgspec.Struct, frozen=True):
    model: str
    input: list[str]


class OllamaEmbedResponse(msgspec.Struct, frozen=True):
    embeddings: list[list[float]]


class EmbeddingsClient:
    """Vectors from the configured provider, over the process's shared HTTP session."""

    def __init__(
        self,
        settings: EmbeddingsSettings,
        http: Callable[[], aiohttp.ClientSession],
        *,
        timeout: float | None = None,
    ) -> None:
        self.settings = settings
        self.http = http
        self.timeout = timeout or EMBEDDINGS_SECONDS
        self.local = _in_process_model(settings)

    @property
    def provider(self) -> str:
        return self.settings.provider

    @property
    def model(self) -> str:
        return self.settings.model

    def model_key(self) -> str:
        """What stored vectors are valid for (memory.dense.DenseKey.model): the model's
        name, or an `onnx` model's digest of its files (blocking: loads it the first time)."""
        return self.local.identity() if isinstance(self.local, OnnxEmbeddings) else self.model

    @property
    def model_name(self) -> str:
        """The model as the operator is shown it (a turn's status line, a failure's reason):
        an `onnx` model's setting is its directory, named by its last part
        (OnnxEmbeddings.name; the round's meta and the server log keep the whole path).
        Other providers' names are shown as set: a `/` in them is part of the name
        (`org/model`), not a path."""
        return self.local.name if isinstance(self.local, OnnxEmbeddings) else self.model

    @property
    def where(self) -> str:
        if self.local is not None:
            return f"the {self.provider} embeddings model {self.model_name}"
        return f"the embeddings endpoint {endpoint_label(self.settings.base_url)}"

    async def embed(self, texts: Sequence[str]) -> NDArray[np.float32]:
        """One row per text, in order (not normalised: memory.dense does that)."""
        if not texts:
            return np.zeros((0, 0), np.float32)
        inputs = [text[:TEXT_CHARS] or " " for text in texts]
        if self.local is not None:
            return self._checked(await self._in_process(self.local, inputs), len(inputs))
        if self.settings.provider == "ollama":
            raw = await self._post("/api/embed", OllamaEmbedRequest(self.model, inputs))
            rows = self._decode(raw, OllamaEmbedResponse).embeddings
        else:
            raw = await self._post("/embeddings", OpenAIEmbeddingsRequest(self.model, inputs))
            data = self._decode(raw, OpenAIEmbeddingsResponse).data
            rows = [item.embedding for item in sorted(data, key=lambda item: item.index)]
        return self._matrix(rows, len(inputs))

    async def _in_process(self, local: InProcess, inputs: list[str]) -> NDArray[np.float32]:
        """On a worker thread (a first call loads the model there); a timeout leaves the
        thread to finish, so the model is loaded for the next turn."""
        try:
            async with asyncio.timeout(self.timeout):
                return await asyncio.to_thread(local.embed, inputs)
        except TimeoutError as exc:
            raise EmbeddingsUnavailable(f"{self.where} timed out") from exc
        except Exception as exc:  # not installed, its files missing, a bad model name or file
            first = (str(exc).splitlines() or [""])[0]
            if isinstance(local, OnnxEmbeddings):
                first = local.shown(first)
            first = first[:200]
            raise EmbeddingsUnavailable(
                f"{self.where} failed ({type(exc).__name__}: {first})"
            ) from exc

    async def _post(self, path: str, request: msgspec.Struct) -> bytes:
        headers = {"Content-Type": "application/json"}
        if self.settings.api_key is not None:
            headers["Authorization"] = f"Bearer {self.settings.api_key.reveal()}"
        url = self.settings.base_url.rstrip("/") + path
        secrets = (self.settings.api_key.reveal(),) if self.settings.api_key else ()
        try:
            async with self.http().post(
                url,
                data=msgspec.json.encode(request),
                headers=headers,
                timeout=aiohttp.ClientTimeout(total=self.timeout),
            ) as response:
                if response.status >= 400:
                    refused = await failure_from_response(
                        response, where=self.where, secrets=secrets
                    )
                    raise EmbeddingsUnavailable(refused.message)
                return await response.read()
        except (aiohttp.ClientError, TimeoutError) as exc:
            failure = failure_from_exception(exc, where=self.where, read_timeout=self.timeout)
            reason = failure.message if failure is not None else type(exc).__name__
            raise EmbeddingsUnavailable(reason) from exc

    def _decode(self, raw: bytes, shape: type[Shape]) -> Shape:
        try:
            return msgspec.json.decode(raw, type=shape)
        except msgspec.DecodeError as exc:
            raise EmbeddingsUnavailable(
                f"{self.where} answered an unexpected shape ({exc})"
            ) from exc

    def _matrix(self, rows: list[list[float]], expected: int) -> NDArray[np.float32]:
        if len(rows) != expected:
            raise EmbeddingsUnavailable(
                f"{self.where} answered {len(rows)} vectors for {expected} texts"
            )
        sizes = {len(row) for row in rows}
        if len(sizes) != 1 or 0 in sizes:
            raise EmbeddingsUnavailable(f"{self.where} answered vectors of unequal or no length")
        return np.asarray(rows, dtype=np.float32)

    def _checked(self, matrix: NDArray[np.float32], expected: int) -> NDArray[np.float32]:
        if matrix.shape[0] != expected:
            raise EmbeddingsUnavailable(
                f"{self.where} answered {matrix.shape[0]} vectors for {expected} texts"
            )
        if matrix.ndim != 2 or matrix.shape[1] == 0:
            raise EmbeddingsUnavailable(f"{self.where} answered vectors of unequal or no length")
        return matrix


def _in_process_model(settings: EmbeddingsSettings) -> InProcess | None:
    if settings.provider == "local":
        return LocalEmbeddings(settings.model)
    if settings.provider == "onnx":
        return OnnxEmbeddings(settings.model)
    return None
