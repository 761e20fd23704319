"""Shared fixtures: real SQLite and PostgreSQL, real Redis, the app with a test operator.

PostgreSQL: each test gets its own schema on the server at STEELFRAME_TEST_POSTGRES_URL
(default the machine's trust-auth server). If it is down, the fixture tries to start it;
where there is none, PostgreSQL tests are skipped with the reason, except under CI=true,
where they must run and fail instead.
"""

from __future__ import annotations

import os
import random
import shutil
import subprocess
import uuid
from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import redis
from sqlalchemy import create_engine, text

from bot.appkeys import SERVICES
from bot.config import Settings
from bot.operators import create_operator
from bot.services import Services, build_services

PG_URL = os.environ.get(
    "STEELFRAME_TEST_POSTGRES_URL", "postgresql+psycopg://postgres@127.0.0.1:5432/test"
)
REDIS_URL = os.environ.get("STEELFRAME_TEST_REDIS_URL", "redis://127.0.0.1:6379")


def _pg_available() -> str | None:
    try:
        engine = create_engine(PG_URL)
        with engine.connect() as connection:
            connection.execute(text("SELECT 1"))
        engine.dispose()
        return None
    except Exception as exc:
        return f"{type(exc).__name__}: {str(exc).splitlines()[0][:160]}"


def _start_postgres() -> None:
    clusters = Path("/etc/postgresql")
    if shutil.which("pg_ctlcluster") and clusters.is_dir():
        for version in os.listdir(clusters):
            subprocess.run(
                ["pg_ctlcluster", "--skip-systemctl-redirect", version, "main", "start"],
                capture_output=True,
                timeout=60,
                check=False,
            )


@pytest.fixture(scope="session")
def postgres_server() -> str:
    problem = _pg_available()
    if problem is not None:
        _start_postgres()
        problem = _pg_available()
    if problem is not None:
        if os.environ.get("CI"):
            pytest.fail(f"PostgreSQL must run in CI but is unreachable at {PG_URL}: {problem}")
        pytest.skip(f"PostgreSQL tests did not run: no server at {PG_URL} ({problem})")
    return PG_URL


@pytest.fixture
def pg_url(postgres_server: str) -> Iterator[str]:
    """A URL whose connections use a fresh schema of their own, dropped afterwards."""
    schema = f"t_{uuid.uuid4().hex[:12]}"
    admin = create_engine(postgres_server, isolation_level="AUTOCOMMIT")
    with admin.connect() as connection:
        connection.execute(text(f'CREATE SCHEMA "{schema}"'))
    joiner = "&" if "?" in postgres_server else "?"
    yield f"{postgres_server}{joiner}options=-csearch_path%3D{schema}"
    with admin.connect() as connection:
        connection.execute(text(f'DROP SCHEMA "{schema}" CASCADE'))
    admin.dispose()


@pytest.fixture
def sqlite_url(tmp_path: Path) -> str:
    return f"sqlite:///{tmp_path / 'steelframe.db'}"


@pytest.fixture(params=["sqlite", "postgres"])
def any_db_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """Both backends, for tests where the database matters."""
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 'steelframe.db'}"
    return str(request.getfixturevalue("pg_url"))


@pytest.fixture(scope="session")
def redis_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A real Redis: the machine's, started if it stopped, else the embedded one dev uses.

    Each test session uses its own database number, so parallel runs do not collide."""
    db = random.randint(1, 15)
    try:
        redis.Redis.from_url(REDIS_URL).ping()
        yield f"{REDIS_URL}/{db}"
        return
    except redis.RedisError:
        pass
    from bot.embedded_redis import start_embedded_redis

    embedded = start_embedded_redis(tmp_path_factory.mktemp("redis"))
    try:
        yield embedded.url.rsplit("/", 1)[0] + f"/{db}"
    finally:
        embedded.stop()


@pytest.fixture
def redis_url(redis_server: str) -> Iterator[str]:
    client = redis.Redis.from_url(redis_server)
    client.flushdb()
    yield redis_server
    client.flushdb()
    client.close()


def make_settings(tmp_path: Path, **overrides: Any) -> Settings:
    values: dict[str, Any] = {
        "database_url": f"sqlite:///{tmp_path / 'steelframe.db'}",
        "data_dir": tmp_path / "var",
        "checkout": tmp_path / "checkout",
        "heartbeat_seconds": 0.2,
    }
    values.update(overrides)
    (tmp_path / "checkout").mkdir(exist_ok=True)
    return Settings.from_env({}, defaults=values)


@pytest.fixture
def settings(tmp_path: Path) -> Settings:
    return make_settings(tmp_path)


@pytest.fixture
def services_factory() -> Iterator[Callable[..., Services]]:
    built: list[Services] = []

    def factory(settings: Settings, **kwargs: Any) -> Services:
        services = build_services(settings, **kwargs)
        built.append(services)
        return services

    yield factory
    for services in built:
        services.db.dispose()


class ApiClient:
    """An aiohttp test client that sends an operator's bearer token."""

    def __init__(self, client: Any, token: str, services: Services) -> None:
        self.raw = client
        self.token = token
        self.services = services

    def headers(self, extra: dict[str, str] | None = None) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.token}", **(extra or {})}

    async def request(self, method: str, path: str, **kwargs: Any) -> Any:
        kwargs["headers"] = self.headers(kwargs.get("headers"))
        return await self.raw.request(method, path, **kwargs)

    async def post(self, path: str, **kwargs: Any) -> Any:
        return await self.request("POST", path, **kwargs)

    async def get(self, path: str, **kwargs: Any) -> Any:
        return await self.request("GET", path, **kwargs)

    async def delete(self, path: str, **kwargs: Any) -> Any:
        return await self.request("DELETE", path, **kwargs)

    def as_operator(self, token: str) -> ApiClient:
        return ApiClient(self.raw, token, self.services)

    def new_operator(self, name: str) -> ApiClient:
        _, token = self.services.db.call(create_operator, name)
        return self.as_operator(token)


@pytest.fixture
async def api_factory(aiohttp_client: Any) -> AsyncIterator[Callable[..., Any]]:
    """Build the real app (with optional overrides, e.g. `runtimes=`) and a client for it."""

    async def factory(settings: Settings, **overrides: Any) -> ApiClient:
        from bot.server import create_app

        app = create_app(settings, **overrides)
        client = await aiohttp_client(app)
        services = app[SERVICES]
        _, token = services.db.call(create_operator, f"op-{uuid.uuid4().hex[:6]}")
        return ApiClient(client, token, services)

    yield factory


@pytest.fixture
async def api(api_factory: Callable[..., Any], settings: Settings) -> ApiClient:
    """The app on SQLite with the offline runtime, and a client for a fresh operator."""
    return await api_factory(settings)


async def read_sse(response: Any, *, until: str | None = "done") -> list[dict[str, Any]]:
    """Parse SSE `data:` frames (ignoring heartbeats) until a terminal frame."""
    import json

    frames: list[dict[str, Any]] = []
    async for raw_line in response.content:
        line = raw_line.decode().rstrip("\n")
        if line.startswith("data: "):
            frame = json.loads(line[len("data: ") :])
            frames.append(frame)
            if frame["type"] in ("done", "error") or (until and frame["type"] == until):
                break
    return frames
