"""A local embeddings server speaking both wire protocols the hybrid ranking uses.

- OpenAI (and vLLM, llama.cpp...): `POST /v1/embeddings {"model", "input": str | [str]}`
  answers `{"object": "list", "data": [{"object": "embedding", "index", "embedding"}],
  "model", "usage": {"prompt_tokens", "total_tokens"}}`; a wrong key is 401 and an unknown
  model 404, both `{"error": {"message", "type", "param", "code"}}`. The data come back in
  reverse order (the protocol orders them by `index`, and a client must honour it).
- Ollama: `POST /api/embed {"model", "input": str | [str]}` answers `{"model",
  "embeddings": [[...]], "total_duration", "load_duration", "prompt_eval_count"}`; an
  unknown model is 404 `{"error": "model \\"x\\" not found, try pulling it first"}`.

It is a fake *model*: a text's vector counts, per concept of its model's concept map, the
text's words that belong to it, plus one constant dimension (no vector is zero). So a
question and a chunk that share no word but speak of the same concepts are close. Every
request is recorded; `down` answers 503, `hang` holds every answer until released.
"""

from __future__ import annotations

import asyncio
import re
from dataclasses import dataclass, field
from typing import Any

from aiohttp import web

Concepts = tuple[frozenset[str], ...]
_WORD = re.compile(r"[a-z0-9]+")


@dataclass(frozen=True)
class EmbedCall:
    protocol: str  # "openai" or "ollama"
    model: str
    inputs: tuple[str, ...]


@dataclass
class FakeEmbeddings:
    models: dict[str, Concepts]
    api_key: str | None = None
    calls: list[EmbedCall] = field(default_factory=list)
    down: bool = False
    hang: bool = False
    release: asyncio.Event = field(default_factory=asyncio.Event)

    def app(self) -> web.Application:
        app = web.Application()
        app.router.add_post("/v1/embeddings", self._openai)
        app.router.add_post("/api/embed", self._ollama)
        return app

    def vector(self, model: str, text: str) -> list[float]:
        words = _WORD.findall(text.lower())
        return [float(sum(w in concept for w in words)) for concept in self.models[model]] + [0.1]

    def texts(self, protocol: str) -> list[str]:
        """Every text embedded over one protocol, in order."""
        return [text for call in self.calls if call.protocol == protocol for text in call.inputs]

    async def _openai(self, request: web.Request) -> web.Response:
        if self.api_key and request.headers.get("Authorization") != f"Bearer {self.api_key}":
            return _openai_error(401, "Incorrect API key provided.", "invalid_api_key")
        body = await request.json()
        model, inputs = body.get("model"), _inputs(body.get("input"))
        if model not in self.models:
            return _openai_error(404, f"The model `{model}` does not exist", "model_not_found")
        if inputs is None:
            return _openai_error(400, "'input' must be a string or array of strings", None)
        if failed := await self._trouble():
            return failed
        self.calls.append(EmbedCall("openai", model, tuple(inputs)))
        data = [
            {"object": "embedding", "index": i, "embedding": self.vector(model, text)}
            for i, text in enumerate(inputs)
        ]
        tokens = sum(len(_WORD.findall(text)) for text in inputs)
        return web.json_response(
            {
                "object": "list",
                "data": data[::-1],
                "model": model,
                "usage": {"prompt_tokens": tokens, "total_tokens": tokens},
            }
        )

    async def _ollama(self, request: web.Request) -> web.Response:
        body = await request.json()
        model, inputs = body.get("model"), _inputs(body.get("input"))
        if model not in self.models:
            return web.json_response(
                {"error": f'model "{model}" not found, try pulling it first'}, status=404
            )
        if inputs is None:
            return web.json_response({"error": "invalid input type"}, status=400)
        if failed := await self._trouble():
            return failed
        self.calls.append(EmbedCall("ollama", model, tuple(inputs)))
        return web.json_response(
            {
                "model": model,
                "embeddings": [self.vector(model, text) for text in inputs],
                "total_duration": 14_143_917,
                "load_duration": 1_019_500,
                "prompt_eval_count": sum(len(_WORD.findall(text)) for text in inputs),
            }
        )

    async def _trouble(self) -> web.Response | None:
        if self.hang:
            await self.release.wait()
        if self.down:
            return web.json_response({"error": "model is loading"}, status=503)
        return None


def _inputs(value: Any) -> list[str] | None:
    if isinstance(value, str):
        return [value]
    if isinstance(value, list) and value and all(isinstance(v, str) for v in value):
        return value
    return None


def _openai_error(status: int, message: str, code: str | None) -> web.Response:
    kind = "invalid_request_error"
    error = {"message": message, "type": kind, "param": None, "code": code}
    return web.json_response({"error": error}, status=status)
