"""Hybrid ranking (issue 31, "The model searches too", its second half): with embeddings on,
a dense round fuses round 1's lexical ranking with the chunks nearest the question in a
model's embedding space. Tested for plumbing through real chat turns over the operator API,
a real Memory on a temp dir, and a local server speaking the OpenAI and Ollama embeddings
protocols (tests/fakes/embeddings_server.py: a fake model whose concept map puts a question
near the chunk that answers it in other words). The `local` provider is tested with the
real model (wordllama's, bundled in its wheel), offline."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import bot.chat.embeddings
import bot.chat.embeddings_local
import bot.chat.hybrid
from bot.config import Settings
from bot.config_models import LOCAL_EMBEDDINGS_MODEL, EmbeddingsSettings
from bot.config_values import ConfigError, Secret
from memory import ChunkIn
from memory.dense import META, DenseKey, DenseVectors
from tests.conftest import ApiClient, make_settings, read_sse
from tests.fakes.embeddings_server import FakeEmbeddings
from tests.fakes.ports import refused_port

KEY = "sk-test-embeddings-0123456789"
REPO = "steelframe-dev/sandbox"
QUESTION = "Why were all the gadgets kicked off the hub before dawn?"
ANSWER_CHUNK = (
    "@yusuf on #15:\ncert-manager renews the broker's TLS certificate every night and the"
    " listener restarts to load it."
)
NOISE = [
    ChunkIn(f"#{n} {topic} needs a review\n\nSee the {topic} notes.", "issue", REPO, issue=n)
    for n, topic in enumerate(["login page", "export job", "search box", "footer"], start=100)
]
CHUNKS = 1 + len(NOISE)
# The fake model's concepts: the question's words on one side, the chunk's on the other.
CONCEPTS = (
    frozenset({"gadgets", "devices", "listener"}),
    frozenset({"kicked", "restarts", "disconnected"}),
    frozenset({"hub", "broker"}),
    frozenset({"dawn", "night", "nightly"}),
    frozenset({"login", "export", "search", "footer"}),
)
MODELS = {"embed-a": CONCEPTS, "embed-b": CONCEPTS[:4]}


@pytest.fixture
async def fake() -> AsyncIterator[FakeEmbeddings]:
    server = FakeEmbeddings(MODELS, api_key=KEY)
    yield server
    server.release.set()  # a held answer ends with the test


async def _api(
    api_factory: Any, settings: Settings, *, chunks: list[ChunkIn] | None = None
) -> ApiClient:
    api: ApiClient = await api_factory(settings)
    assert api.services.memory is not None
    if chunks:
        api.services.memory.add(chunks)
    return api


def _settings(tmp_path: Path, url: str, **overrides: Any) -> Settings:
    values: dict[str, Any] = {
        "chat_embeddings": "openai",
        "chat_embeddings_model": "embed-a",
        "openai_base_url": url,
        "openai_api_key": Secret(KEY),
        **overrides,
    }
    return make_settings(tmp_path, **values)


async def _turn(api: ApiClient, message: str = QUESTION) -> tuple[dict[str, Any], list[str]]:
    response = await api.post("/api/operator/chat/stream", json={"message": message})
    frames = await read_sse(response)
    done = frames[-1]
    assert done["type"] == "done"
    statuses = [f["text"] for f in frames if f["type"] == "status"]
    return done["response"], statuses


async def _rounds(api: ApiClient, response: dict[str, Any]) -> list[dict[str, Any]]:
    session = await (await api.get(f"/api/operator/chat/session/{response['session']}")).json()
    rounds: list[dict[str, Any]] = session["messages"][-1]["meta"]["retrieval"]["rounds"]
    return rounds


def _dense(rounds: list[dict[str, Any]]) -> dict[str, Any]:
    return next(r for r in rounds if r["query"] == "dense")


async def test_a_question_sharing_no_word_with_its_answer_is_found_by_its_vector(
    api_factory: Any, fake: FakeEmbeddings, aiohttp_server: Any, tmp_path: Path
) -> None:
    server = await aiohttp_server(fake.app())
    settings = _settings(tmp_path, str(server.make_url("/v1")))
    answer = ChunkIn(ANSWER_CHUNK, "comment", REPO, issue=15)
    api = await _api(api_factory, settings, chunks=[*NOISE, answer])
    response, statuses = await _turn(api)
    found = [h for h in response["retrieved"] if h["text"] == ANSWER_CHUNK]
    assert found and found[0]["round"] == "dense"
    assert found[0]["strength"] == "weak"  # its vector found it; no word of the question did
    dense = _dense(await _rounds(api, response))
    assert dense["round"] == 2 and dense["dense_model"] == "embed-a"
    assert found[0]["id"] in dense["ids"] and found[0]["id"] in dense["dense_only"]
    assert dense["fused"][0] == found[0]["id"] and dense["embedded"] == CHUNKS
    assert "retrieve 2/4 · 3 hits · fused with embed-a vectors" in statuses
    # one call for the question (asked at the turn's start), one batch for the chunks
    assert sorted(len(call.inputs) for call in fake.calls) == [1, CHUNKS]
    assert QUESTION in fake.texts("openai")


async def test_vectors_are_kept_across_a_restart_and_a_model_change_embeds_again(
    api_factory: Any, fake: FakeEmbeddings, aiohttp_server: Any, tmp_path: Path
) -> None:
    server = await aiohttp_server(fake.app())
    settings = _settings(tmp_path, str(server.make_url("/v1")))
    api = await _api(api_factory, settings, chunks=[*NOISE])
    await _turn(api)
    assert len(fake.texts("openai")) == 1 + len(NOISE)

    # A restart (a new process over the same data dir and database), one new chunk: only
    # the new chunk and the question are embedded.
    fake.calls.clear()
    again = await _api(
        api_factory, settings, chunks=[ChunkIn(ANSWER_CHUNK, "comment", REPO, issue=15)]
    )
    response, _ = await _turn(again)
    assert fake.texts("openai") == [QUESTION, ANSWER_CHUNK]
    assert _dense(await _rounds(again, response))["embedded"] == 1
    assert any(h["text"] == ANSWER_CHUNK for h in response["retrieved"])

    fake.calls.clear()
    await _turn(again)
    assert fake.texts("openai") == [QUESTION]  # nothing new: the question only

    # Another model (of another dimension): every chunk is embedded again.
    fake.calls.clear()
    other = await _api(
        api_factory,
        _settings(tmp_path, str(server.make_url("/v1")), chat_embeddings_model="embed-b"),
    )
    response, _ = await _turn(other)
    assert {call.model for call in fake.calls} == {"embed-b"}
    assert len(fake.texts("openai")) == 1 + CHUNKS
    assert any(h["text"] == ANSWER_CHUNK for h in response["retrieved"])


async def test_a_large_backlog_is_embedded_in_the_background(
    api_factory: Any,
    fake: FakeEmbeddings,
    aiohttp_server: Any,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(bot.chat.hybrid, "BACKFILL_INLINE", 2)
    monkeypatch.setattr(bot.chat.hybrid, "BATCH", 2)
    server = await aiohttp_server(fake.app())
    api = await _api(
        api_factory,
        _settings(tmp_path, str(server.make_url("/v1"))),
        chunks=[*NOISE, ChunkIn(ANSWER_CHUNK, "comment", REPO, issue=15)],
    )
    response, _ = await _turn(api)
    dense = _dense(await _rounds(api, response))
    assert (dense["embedded"], dense["backfilling"]) == (0, CHUNKS)  # this turn: none yet
    await api.services.background.drain()
    assert sorted(len(call.inputs) for call in fake.calls) == [1, 1, 2, 2]  # batches of 2
    fake.calls.clear()
    response, _ = await _turn(api)
    assert fake.texts("openai") == [QUESTION]
    assert any(h["text"] == ANSWER_CHUNK for h in response["retrieved"])


async def test_ollama_protocol_at_the_chat_models_host(
    api_factory: Any, fake: FakeEmbeddings, aiohttp_server: Any, tmp_path: Path
) -> None:
    server = await aiohttp_server(fake.app())
    # OPENAI_BASE_URL is Ollama's OpenAI-compatible /v1; its own API is at the root.
    settings = _settings(tmp_path, str(server.make_url("/v1")), chat_embeddings="ollama")
    assert settings.embeddings() is not None
    assert settings.embeddings().base_url == str(server.make_url("")).rstrip("/")  # type: ignore[union-attr]
    api = await _api(
        api_factory, settings, chunks=[*NOISE, ChunkIn(ANSWER_CHUNK, "comment", REPO, issue=15)]
    )
    response, _ = await _turn(api)
    assert {call.protocol for call in fake.calls} == {"ollama"}
    found = [h for h in response["retrieved"] if h["text"] == ANSWER_CHUNK]
    assert found and found[0]["round"] == "dense"


@pytest.mark.parametrize("trouble", ["refused", "503", "timeout"])
async def test_a_failing_provider_leaves_the_lexical_rounds_and_says_why(
    api_factory: Any,
    fake: FakeEmbeddings,
    aiohttp_server: Any,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    trouble: str,
) -> None:
    server = await aiohttp_server(fake.app())
    url = str(server.make_url("/v1"))
    if trouble == "refused":
        url = f"http://127.0.0.1:{refused_port()}/v1"
    fake.down = trouble == "503"
    fake.hang = trouble == "timeout"
    monkeypatch.setattr(bot.chat.embeddings, "EMBEDDINGS_SECONDS", 0.2)
    lexical = ChunkIn("The export job times out on large ledgers.", "comment", REPO, issue=7)
    api = await _api(api_factory, _settings(tmp_path, url), chunks=[*NOISE, lexical])
    response, statuses = await _turn(api, "why does the export job time out?")
    assert response["retrieval_available"] is True
    assert any(h["text"] == lexical.text and h["round"] == "message" for h in response["retrieved"])
    dense = _dense(await _rounds(api, response))
    assert dense["hits"] == 0
    reason = {"refused": "cannot reach", "503": "HTTP 503", "timeout": "timed out"}[trouble]
    assert reason in dense["unavailable"]
    assert any("dense ranking unavailable" in s and reason in s for s in statuses)


async def test_off_by_default_no_embeddings_call(
    api_factory: Any, fake: FakeEmbeddings, aiohttp_server: Any, tmp_path: Path
) -> None:
    server = await aiohttp_server(fake.app())
    settings = make_settings(tmp_path, openai_base_url=str(server.make_url("/v1")))
    assert settings.chat_embeddings == "off" and settings.embeddings() is None
    api = await _api(
        api_factory, settings, chunks=[*NOISE, ChunkIn(ANSWER_CHUNK, "comment", REPO, issue=15)]
    )
    response, statuses = await _turn(api)
    assert fake.calls == []
    assert all(r["query"] != "dense" for r in await _rounds(api, response))
    assert not any("/4 ·" in s for s in statuses)
    assert not (settings.data_dir / "memory" / "dense").exists()


def test_bad_settings_stop_start_up_naming_the_variable(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="STEELFRAME_CHAT_EMBEDDINGS:"):
        Settings.from_env({"STEELFRAME_CHAT_EMBEDDINGS": "bert"})
    with pytest.raises(ConfigError, match="STEELFRAME_CHAT_EMBEDDINGS_MODEL: required"):
        Settings.from_env({"STEELFRAME_CHAT_EMBEDDINGS": "openai"})
    with pytest.raises(ConfigError, match="STEELFRAME_CHAT_EMBEDDINGS_URL"):
        Settings.from_env(
            {
                "STEELFRAME_CHAT_EMBEDDINGS": "ollama",
                "STEELFRAME_CHAT_EMBEDDINGS_MODEL": "nomic-embed-text",
                "STEELFRAME_CHAT_EMBEDDINGS_URL": "localhost:11434",
            }
        )
    # The OpenAI key goes only to OPENAI_BASE_URL's host.
    elsewhere = Settings.from_env(
        {
            "STEELFRAME_CHAT_EMBEDDINGS": "openai",
            "STEELFRAME_CHAT_EMBEDDINGS_MODEL": "text-embedding-3-small",
            "STEELFRAME_CHAT_EMBEDDINGS_URL": "http://vllm.internal:8000/v1",
            "OPENAI_API_KEY": KEY,
        }
    ).embeddings()
    assert elsewhere is not None and elsewhere.api_key is None


async def test_an_edited_chunks_old_vector_is_never_a_hit(
    api_factory: Any, fake: FakeEmbeddings, aiohttp_server: Any, tmp_path: Path
) -> None:
    server = await aiohttp_server(fake.app())
    edited = ChunkIn(ANSWER_CHUNK, "comment", REPO, issue=15, key="comment-15")
    api = await _api(
        api_factory, _settings(tmp_path, str(server.make_url("/v1"))), chunks=[*NOISE, edited]
    )
    first, _ = await _turn(api)
    old = next(h["id"] for h in first["retrieved"] if h["text"] == ANSWER_CHUNK)
    memory = api.services.memory
    assert memory is not None
    memory.add(
        [
            ChunkIn(
                "@yusuf on #15: never mind, it was the footer.",
                "comment",
                REPO,
                issue=15,
                key="comment-15",
            )
        ]
    )
    assert old not in memory.live_ids(repo=REPO).tolist()
    second, _ = await _turn(api)
    assert old not in [h["id"] for h in second["retrieved"]]
    assert old not in _dense(await _rounds(api, second))["fused"]


def test_a_corrupt_store_is_dropped_and_filled_again(tmp_path: Path) -> None:
    key = DenseKey("openai", "embed-a", "db-1")
    store = DenseVectors.beside(tmp_path, key)
    store.add(np.asarray([3, 1], np.int64), np.asarray([[1, 0], [0, 2]], np.float32))
    nearest = store.nearest(np.asarray([0, 1], np.float32), np.asarray([1, 3]), 2)
    assert nearest.ids == [1, 3] and nearest.scores[0] == pytest.approx(1.0)
    assert DenseVectors.beside(tmp_path, key).missing(np.asarray([1, 2, 3])).tolist() == [2]
    (tmp_path / "dense" / META).write_text("{corrupt")
    reopened = DenseVectors.beside(tmp_path, key)
    assert reopened.missing(np.asarray([1, 3])).tolist() == [1, 3]  # dropped, not an error
    reopened.add(np.asarray([1], np.int64), np.asarray([[0, 5]], np.float32))
    assert reopened.count == 1
    # vectors of another database's chunk ids are never answered from
    assert DenseVectors.beside(tmp_path, DenseKey("openai", "embed-a", "db-2")).count == 0


def test_the_search_benchmark_runs(capsys: pytest.CaptureFixture[str]) -> None:
    from bench import dense_search

    dense_search.main(["--smoke"])
    assert "nearest p50" in capsys.readouterr().out


# -- the `local` provider: wordllama's bundled model, in-process (bot/chat/embeddings_local.py) --

PARAPHRASE = "Which physician treats the child's fever?"
PARAPHRASED = "A paediatric doctor sees kids with a high temperature."
_connections: list[list[object]] = []  # while a test watches: every address a socket dialled


def _audit(event: str, args: tuple[object, ...]) -> None:
    if _connections and event in ("socket.connect", "socket.getaddrinfo"):
        _connections[-1].append(args[1] if event == "socket.connect" else args[0])


sys.addaudithook(_audit)  # a hook cannot be removed: it records only while a list is open


def _local_address(address: object) -> bool:
    host = address[0] if isinstance(address, tuple) else address
    if isinstance(host, bytes):
        host = host.decode()
    if not isinstance(host, str) or host.startswith("/") or host == "":
        return True  # a Unix socket
    return host in ("localhost", "::1") or host.startswith("127.")


async def test_local_model_finds_a_paraphrase_offline_and_keeps_its_vectors(
    api_factory: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Real wordllama, loaded inside the test (its per-process cache emptied) while every
    socket the process dials is recorded by an audit hook: none leaves this machine. (Nothing
    is patched to stop a download: `disable_download=True` would raise, not fetch.)"""
    monkeypatch.setattr(bot.chat.embeddings_local, "_models", {})
    settings = make_settings(tmp_path, chat_embeddings="local")
    answer = ChunkIn(PARAPHRASED, "comment", REPO, issue=21)
    _connections.append([])
    try:
        api = await _api(api_factory, settings, chunks=[*NOISE, answer])
        response, statuses = await _turn(api, PARAPHRASE)
    finally:
        dialled = _connections.pop()
    assert bot.chat.embeddings_local.loaded() == [LOCAL_EMBEDDINGS_MODEL]
    assert dialled  # the hook saw the test client reach the local server...
    assert [a for a in dialled if not _local_address(a)] == []  # ...and nothing else
    found = [h for h in response["retrieved"] if h["text"] == PARAPHRASED]
    assert found and found[0]["round"] == "dense" and found[0]["strength"] == "weak"
    dense = _dense(await _rounds(api, response))
    assert dense["dense_model"] == LOCAL_EMBEDDINGS_MODEL and "unavailable" not in dense
    assert found[0]["id"] in dense["dense_only"] and dense["embedded"] == CHUNKS
    assert any(
        s.startswith("retrieve 2/4 · ") and s.endswith("fused with l2_supercat vectors")
        for s in statuses
    )
    meta = json.loads((settings.data_dir / "memory" / "dense" / META).read_text())
    assert (meta["provider"], meta["model"], meta["dimension"]) == ("local", "l2_supercat", 256)

    # A restart over the same data dir: the stored vectors answer, only the question is new.
    again = await _api(api_factory, settings)
    response, _ = await _turn(again, PARAPHRASE)
    assert _dense(await _rounds(again, response))["embedded"] == 0
    assert any(h["text"] == PARAPHRASED for h in response["retrieved"])


async def test_a_local_model_that_cannot_load_leaves_the_lexical_rounds(
    api_factory: Any, tmp_path: Path
) -> None:
    settings = make_settings(
        tmp_path, chat_embeddings="local", chat_embeddings_model="no_such_model"
    )
    lexical = ChunkIn("The export job times out on large ledgers.", "comment", REPO, issue=7)
    api = await _api(api_factory, settings, chunks=[*NOISE, lexical])
    response, statuses = await _turn(api, "why does the export job time out?")
    assert any(h["text"] == lexical.text and h["round"] == "message" for h in response["retrieved"])
    dense = _dense(await _rounds(api, response))
    assert dense["hits"] == 0
    assert "the local embeddings model no_such_model failed" in dense["unavailable"]
    assert any("dense ranking unavailable" in s for s in statuses)


def test_local_settings_need_no_model_url_or_key() -> None:
    local = Settings.from_env({"STEELFRAME_CHAT_EMBEDDINGS": "local", "OPENAI_API_KEY": KEY})
    assert local.embeddings() == EmbeddingsSettings("local", "l2_supercat", "", None)


def test_start_up_never_imports_wordllama_or_scipy() -> None:
    """The service's parts, the client and the local provider's module import without
    wordllama; only a turn with `local` on loads it (CLI start-up is tests/test_cli.py's).
    Nor scipy: only learning a repository's domain words (memory.domain) needs it, and it
    cost every serve, worker and CLI process about 0.2 s of CPU at start-up."""
    probe = (
        "import sys, steelframe.parts, steelframe.server, bot.chat.embeddings,"
        " bot.chat.embeddings_local\n"
        "print('wordllama' in sys.modules, 'scipy' in sys.modules)\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, timeout=60, check=True
    )
    assert result.stdout.strip().splitlines()[-1] == "False False"
