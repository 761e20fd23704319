"""Shared fixtures: real SQLite and PostgreSQL, real Redis, the app with a test operator.

PostgreSQL: each test gets its own schema on the server at STEELFRAME_TEST_POSTGRES_URL
(default the machine's trust-auth server). If it is down, the fixture tries to start it;
where there is none, PostgreSQL tests are skipped with the reason, except under CI=true,
where they must run and fail instead.
"""

from __future__ import annotations

import contextlib
import os
import random
import shutil
import signal
import socket
import subprocess
import uuid
import weakref
from collections import deque
from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import redis
from aiohttp.test_utils import TestServer
from aiohttp.web_runner import BaseRunner
from sqlalchemy import create_engine, text
from sqlalchemy.exc import DBAPIError

from bot.config import Settings
from bot.operators import create_operator
from steelframe.parts import PARTS, Parts, build_parts
from tests.fakes.patience import PATIENCE_SECONDS

PG_URL = os.environ.get(
    "STEELFRAME_TEST_POSTGRES_URL", "postgresql+psycopg://postgres@127.0.0.1:5432/test"
)
REDIS_URL = os.environ.get("STEELFRAME_TEST_REDIS_URL", "redis://127.0.0.1:6379")
# `--cpu-profile=DIR`: CPU seconds per test, child processes included (off unless asked).
# tests.fakes.migrated: a fresh SQLite database is migrated by copying a template (see there);
# tests.gc_policy: the test processes' garbage collection thresholds (see there).
pytest_plugins = ("tests.cpu_profile", "tests.fakes.migrated", "tests.gc_policy")


def pytest_configure(config: pytest.Config) -> None:
    """Ctrl-C as a terminal sends it: a suite started as a background job (`make test &`,
    a CI runner's shell without job control) inherits SIGINT ignored, and so would every
    process it starts (an ignored signal stays ignored across exec). The tests of a Ctrl-C
    reaching `steelframe dev` then failed, or passed, by which test had last set a handler
    in their worker. Caught here instead, each process the tests start begins with it at
    its default, as under a terminal."""
    if signal.getsignal(signal.SIGINT) == signal.SIG_IGN:
        signal.signal(signal.SIGINT, signal.default_int_handler)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Tests marked `slow` first, the rest in their usual order. pytest-xdist hands tests
    out in this order: the long ones (real processes, outages waited out) start while
    every worker is busy and the many short ones even out the ends, instead of a long
    test from the end of the alphabet running alone after the others have finished."""
    items.sort(key=lambda item: item.get_closest_marker("slow") is None)


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


@pytest.fixture(scope="session")
def _left_schemas(postgres_server: str) -> Iterator[list[str]]:
    """Schemas a test's teardown could not drop at once, dropped when the session ends; then
    the database is vacuumed (below)."""
    left: list[str] = []
    yield left
    admin = create_engine(postgres_server, isolation_level="AUTOCOMMIT")
    with admin.connect() as connection:
        for schema in left:
            connection.execute(text(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE'))
        # Each test's schema leaves its tables' rows dead in the system catalogs when it is
        # dropped (pg_attribute, pg_depend, pg_class...: ~2.5 million after a day of runs
        # here, beside 1,500 live), and a server with autovacuum off (this machine's) never
        # takes them away: every later run's catalog work slowed. A second or two here
        # leaves the server as the session found it; without the rights it warns, no more.
        with contextlib.suppress(DBAPIError):
            connection.execute(text("VACUUM"))
    admin.dispose()


@pytest.fixture
def pg_url(postgres_server: str, _left_schemas: list[str]) -> Iterator[str]:
    """A URL whose connections use a fresh schema of their own, dropped afterwards."""
    schema = f"t_{uuid.uuid4().hex[:12]}"
    admin = create_engine(postgres_server, isolation_level="AUTOCOMMIT")
    with admin.connect() as connection:
        connection.execute(text(f'CREATE SCHEMA "{schema}"'))
    joiner = "&" if "?" in postgres_server else "?"
    yield f"{postgres_server}{joiner}options=-csearch_path%3D{schema}"
    # A fixture set up after this one (the test's service) is torn down after it and may
    # still be writing: the drop then waits on its locks, or deadlocks with it. Leave such
    # a schema to the session's end rather than fail the test in its teardown.
    try:
        with admin.connect() as connection:
            connection.execute(text("SET lock_timeout = '2s'"))
            connection.execute(text(f'DROP SCHEMA "{schema}" CASCADE'))
    except DBAPIError:
        _left_schemas.append(schema)
    finally:
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


@pytest.fixture
def any_db(any_db_url: str) -> Iterator[Any]:
    """A migrated database (bot.db.Database) on each backend, disposed afterwards."""
    from bot.db import Database, upgrade

    database = Database.from_url(any_db_url)
    upgrade(database.engine)
    yield database
    database.dispose()


@pytest.fixture
def two_processes(any_db: Any, any_db_url: str) -> Iterator[tuple[Any, Any]]:
    """`any_db` and a second Database on the same URL, each with connections of its own as
    two processes have, for interleaving their transactions (tests/fakes/interleave.py)."""
    from bot.db import Database

    second = Database.from_url(any_db_url)
    yield any_db, second
    second.dispose()


_CLAIM_OWNER = f"{socket.gethostname()}:{os.getpid()}"
# Take over a claim only if it still names the dead session that made it.
_TAKE_OVER = """
if redis.call('GET', KEYS[1]) == ARGV[1] then
  return redis.call('SET', KEYS[1], ARGV[2], 'EX', ARGV[3])
end
return false
"""


def _claim_redis_database(admin: redis.Redis) -> int:
    """A Redis database number of this session's own: a free one, else one whose claiming
    session died on this machine (a killed run never released it)."""
    numbers = random.sample(range(1, 16), 15)
    for db in numbers:
        if admin.set(f"steelframe-test:db:{db}", _CLAIM_OWNER, nx=True, ex=3600):
            return db
    host = socket.gethostname()
    for db in numbers:
        key = f"steelframe-test:db:{db}"
        owner = (admin.get(key) or b"").decode()
        owner_host, _, pid = owner.rpartition(":")
        if owner_host == host and pid.isdigit() and not _alive(int(pid)):
            if admin.eval(_TAKE_OVER, 1, key, owner, _CLAIM_OWNER, 3600):
                return db
    raise RuntimeError("all 15 Redis test databases are claimed by other live test sessions")


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


@pytest.fixture(scope="session")
def redis_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A real Redis: the machine's, started if it stopped, else the embedded one dev uses.

    Each test session claims a database number of its own (a key in database 0 that expires
    if the session dies), so parallel runs and xdist workers never flush each other's data."""
    try:
        admin = redis.Redis.from_url(REDIS_URL)
        admin.ping()
    except redis.RedisError:
        admin = None
    if admin is not None:
        db = _claim_redis_database(admin)
        try:
            yield f"{REDIS_URL}/{db}"
        finally:
            admin.delete(f"steelframe-test:db:{db}")
            admin.close()
        return
    db = random.randint(1, 15)
    from steelframe.embedded_redis import start_embedded_redis

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


async def store_deliveries(db: Any, deliveries: list[Any]) -> set[str]:
    """Store webhook deliveries the way the receiver does (webhooks.writer.DeliveryWriter:
    its connection, its one multi-row INSERT); returns the ids that were new."""
    import asyncio

    from webhooks.writer import DeliveryWriter

    writer = DeliveryWriter(db)
    try:
        new = await asyncio.gather(*(writer.record(delivery) for delivery in deliveries))
    finally:
        await writer.close()
    return {d.delivery_id for d, is_new in zip(deliveries, new, strict=True) if is_new}


@pytest.fixture
def settings(tmp_path: Path) -> Settings:
    return make_settings(tmp_path)


@pytest.fixture
def services_factory() -> Iterator[Callable[..., Parts]]:
    built: list[Parts] = []

    def factory(settings: Settings, **kwargs: Any) -> Parts:
        services = build_parts(settings, **kwargs)
        built.append(services)
        return services

    yield factory
    for services in built:
        services.db.dispose()


class ApiClient:
    """An aiohttp test client that sends an operator's bearer token; its answers (and those
    of the TUI clients it makes) are checked against the app's OpenAPI document."""

    def __init__(self, client: Any, token: str, services: Parts, contract: Any) -> None:
        self.raw = client
        self.token = token
        self.services = services
        self.contract = contract

    def operator_client(self, *, token: str | None = None, url: str | None = None) -> Any:
        """The TUI's OperatorClient for this app (or for a proxy in front of it at `url`)."""
        from yarl import URL

        from tests.api_contract import checked_response_class
        from tui_client.api import OperatorClient

        base = url or str(self.raw.make_url("")).rstrip("/")
        self.contract.origins.add(URL(base).origin())
        options = {"response_class": checked_response_class(self.contract)}
        chosen = token if token is not None else self.token
        return OperatorClient(base, chosen, session_options=options)

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
        return ApiClient(self.raw, token, self.services, self.contract)

    def new_operator(self, name: str) -> ApiClient:
        _, token = self.services.db.call(create_operator, name)
        return self.as_operator(token)


class QuietTestServer(TestServer):
    async def _make_runner(self, **kwargs: Any) -> BaseRunner:
        from steelframe.protocol_log import QuietAppRunner

        return QuietAppRunner(self.app, **kwargs)


@pytest.fixture
async def api_factory(aiohttp_client: Any) -> AsyncIterator[Callable[..., Any]]:
    """Build the real app (with optional overrides, e.g. `runtimes=`) and a client for it.

    Every answer the client receives is checked against the app's OpenAPI document
    (tests/api_contract.py); a mismatch fails the test where it reads the answer, and
    again at teardown."""
    from operator_api.openapi import OPENAPI_DOCUMENT
    from tests.api_contract import ApiContract, checked_response_class

    contracts: list[ApiContract] = []

    async def factory(settings: Settings, **overrides: Any) -> ApiClient:
        from steelframe.server import create_app

        app = create_app(settings, **overrides)
        contract = ApiContract(app[OPENAPI_DOCUMENT])
        contracts.append(contract)
        # Served like `steelframe serve` serves it (malformed requests answered quietly).
        server = QuietTestServer(app)
        client = await aiohttp_client(server, response_class=checked_response_class(contract))
        contract.origins.add(client.make_url("/").origin())
        services = app[PARTS]
        _, token = services.db.call(create_operator, f"op-{uuid.uuid4().hex[:6]}")
        return ApiClient(client, token, services, contract)

    yield factory
    for contract in contracts:
        with contextlib.suppress(AssertionError):  # listed in contract.problems
            contract.flush()
    problems = [p for contract in contracts for p in contract.problems]
    assert not problems, "answers broke the OpenAPI document:\n" + "\n".join(problems)


@pytest.fixture
async def api(api_factory: Callable[..., Any], settings: Settings) -> ApiClient:
    """The app on SQLite with the offline runtime, and a client for a fresh operator."""
    return await api_factory(settings)


class _FrameStream:
    """The frames of one SSE response, parsed by the TUI's reader (the project's one SSE
    client parser); frames a chunk carried past the one a test stopped at wait here for its
    next read."""

    def __init__(self, response: Any) -> None:
        from tui_client.sse import SseReader

        self.response = response
        self.reader = SseReader()
        self.ready: deque[dict[str, Any]] = deque()

    async def next(self) -> dict[str, Any] | None:
        while not self.ready:
            chunk = await self.response.content.readany()
            if not chunk:
                return None
            self.ready.extend(self.reader.feed(chunk))
        return self.ready.popleft()


_STREAMS: weakref.WeakKeyDictionary[Any, _FrameStream] = weakref.WeakKeyDictionary()


async def frames_until(
    response: Any, stop: Callable[[dict[str, Any]], bool]
) -> list[dict[str, Any]]:
    """Frames of an SSE response up to and including the first one `stop` accepts (or to
    the end of the stream)."""
    stream = _STREAMS.get(response)
    if stream is None:
        stream = _STREAMS[response] = _FrameStream(response)
    frames: list[dict[str, Any]] = []
    while (frame := await stream.next()) is not None:
        frames.append(frame)
        if stop(frame):
            break
    return frames


async def read_sse(response: Any, *, until: str | None = "done") -> list[dict[str, Any]]:
    """Frames (heartbeats are comments, not frames) until a terminal frame or `until`."""
    return await frames_until(
        response,
        lambda f: f["type"] in ("done", "error") or (until is not None and f["type"] == until),
    )


# -- The local GitHub sandbox (issue 4) ---------------------------------------------------
# A running sandbox with the App installed on SANDBOX_REPO, clients for it, settings that
# point the service at it, and a contract check at teardown: every request and answer
# the sandbox saw, and every webhook it sent, must match GitHub's OpenAPI description and
# webhook schemas in ../shared/github (resolved from the repository root).

GITHUB_DATA = Path(
    os.environ.get(
        "STEELFRAME_TEST_GITHUB_DATA",
        Path(__file__).resolve().parents[1].parent / "shared" / "github",
    )
)
if not (GITHUB_DATA / "openapi").is_dir():
    pytest.exit(
        f"GitHub test data not found at {GITHUB_DATA}: the tests read the real payloads and "
        "schemas from ../shared/github beside the checkout (CI lays it there); elsewhere set "
        "STEELFRAME_TEST_GITHUB_DATA to that folder",
        returncode=2,
    )
SANDBOX_REPO = "steelframe-dev/sandbox"  # Settings.repo's default
SANDBOX_APP_ID = 4242
WEBHOOK_SECRET = "sandbox-webhook-secret"


@pytest.fixture(scope="session")
def github_app_keys() -> tuple[str, str]:
    """(private PEM, public PEM) of the sandbox App, generated once per test session."""
    from github_sandbox import generate_app_keys

    return generate_app_keys()


def webhook_headers(
    body: bytes, event: str, *, delivery: str | None = None, secret: str = WEBHOOK_SECRET
) -> dict[str, str]:
    """The headers GitHub sends with a delivery, signed with `secret`."""
    from webhooks.signature import signature_for

    return {
        "Content-Type": "application/json",
        "User-Agent": "GitHub-Hookshot/test",
        "X-GitHub-Event": event,
        "X-GitHub-Delivery": delivery or str(uuid.uuid4()),
        "X-Hub-Signature-256": signature_for(secret, body),
    }


class GitHubSandbox:
    """A running sandbox (`.sandbox` is the live world) and helpers around it."""

    def __init__(self, server: Any, private_key: str, installation_id: int) -> None:
        from github_sandbox.contract import Contract

        self.server = server
        self.sandbox = server.sandbox
        self.url: str = server.url
        self.app_id = SANDBOX_APP_ID
        self.private_key = private_key
        self.repo = SANDBOX_REPO
        self.installation_id = installation_id
        self.contract = Contract.of(GITHUB_DATA)
        self._clients: list[Any] = []

    @property
    def control_headers(self) -> dict[str, str]:
        """What a call to the control API (/_sandbox/*) must send: this start's secret."""
        from github_sandbox.control_routes import SECRET_HEADER

        return {SECRET_HEADER: self.sandbox.control_secret}

    def client(self, **overrides: Any) -> Any:
        """A GitHubClient for the sandbox App; no write spacing unless `pacing=` says so."""
        from bot.config_values import Secret
        from bot.github.client import GitHubClient
        from bot.github.pacing import PacingPolicy

        options: dict[str, Any] = {"base_url": self.url, "pacing": PacingPolicy(min_interval=0)}
        options.update(overrides)
        client = GitHubClient(app_id=self.app_id, private_key=Secret(self.private_key), **options)
        self._clients.append(client)
        return client

    def settings(self, tmp_path: Path, **overrides: Any) -> Settings:
        from bot.config_values import Secret

        values: dict[str, Any] = {
            "app_id": self.app_id,
            "private_key": Secret(self.private_key),
            "webhook_secret": Secret(WEBHOOK_SECRET),
            "github_api_url": self.url,
            "github_write_interval": 0.0,
            "repo": self.repo,
        }
        values.update(overrides)
        return make_settings(tmp_path, **values)

    def fail(self, kind: str = "server_error", **spec: Any) -> None:
        """Inject failures: kind server_error | secondary_rate_limit | primary_rate_limit |
        too_many_requests; `path` (fnmatch), `method`, `times`, `after_effect`..."""
        from github_sandbox.faults import fault_from_json

        self.sandbox.faults.add(fault_from_json({"kind": kind, **spec}, now=self.sandbox.clock()))

    def use_clock(self, clock: Callable[[], float]) -> None:
        """Run the sandbox on a test's fake clock (JWT checks, token expiry, rate limits)."""
        self.sandbox.clock = clock
        self.sandbox.world.clock = clock

    def deliver_to(self, url: str, secret: str = WEBHOOK_SECRET) -> None:
        self.sandbox.set_webhook(url, secret)

    async def settle(self) -> None:
        """Wait until every webhook the sandbox queued has been attempted (at most
        PATIENCE_SECONDS: each attempt is one POST the sandbox itself bounds at 10 s, so how
        long this may take decides no outcome, only how long a hang takes to fail)."""
        import asyncio

        await asyncio.wait_for(self.sandbox.hooks.settle(), PATIENCE_SECONDS)

    def user_token(self, login: str, permission: str | None = None) -> str:
        """A token acting as a person; `permission` makes them a collaborator on the repo."""
        if permission is not None:
            self.sandbox.grant(self.repo, login, permission)
        return str(self.sandbox.user_token(login))

    def contract_problems(self) -> list[str]:
        """Every exchange and webhook of this test against GitHub's description: the
        query, request, status, body and headers (`Contract.exchange_problems`, the one
        check the contract tests use too), and each webhook's payload."""
        problems = []
        for ex in self.sandbox.traffic:
            if not ex.injected:
                problems += self.contract.exchange_problems(ex)
        for delivery in self.sandbox.hooks.sent:
            where = f"webhook {delivery.event}.{delivery.action}"
            problems += [
                f"{where} {p}"
                for p in self.contract.webhook_problems(delivery.event, delivery.payload)
            ]
            problems += [
                f"{where} lacks {p}"
                for p in self.contract.shape_problems(delivery.event, delivery.payload)
            ]
        return problems

    async def close(self) -> None:
        for client in self._clients:
            await client.close()
        await self.server.close()


@pytest.fixture
async def github_sandbox(
    tmp_path: Path, github_app_keys: tuple[str, str]
) -> AsyncIterator[GitHubSandbox]:
    """The sandbox with the App installed on SANDBOX_REPO (which has a bare git repo).

    Teardown fails the test if any exchange or webhook broke GitHub's contract."""
    from github_sandbox import Sandbox, serve_sandbox

    private_key, public_key = github_app_keys
    sandbox = Sandbox(
        app_id=SANDBOX_APP_ID, public_key_pem=public_key, root=tmp_path / "sandbox-git", record=True
    )
    server = await serve_sandbox(sandbox)
    installation = sandbox.install("steelframe-dev", account_type="Organization", notify=False)
    sandbox.add_repo(SANDBOX_REPO, installation=installation, notify=False)
    handle = GitHubSandbox(server, private_key, installation.id)
    try:
        yield handle
    finally:
        await handle.close()
    problems = handle.contract_problems()
    assert not problems, "sandbox traffic broke GitHub's contract:\n" + "\n".join(problems)


@pytest.fixture
def github_client(github_sandbox: GitHubSandbox) -> Any:
    """A GitHubClient for the sandbox (closed with the sandbox)."""
    return github_sandbox.client()


@pytest.fixture
def github_settings(tmp_path: Path, github_sandbox: GitHubSandbox) -> Settings:
    """Settings whose GitHub App is the sandbox's (webhook secret WEBHOOK_SECRET)."""
    return github_sandbox.settings(tmp_path)


@pytest.fixture
async def github_service(
    api_factory: Callable[..., Any], github_sandbox: GitHubSandbox, github_settings: Settings
) -> ApiClient:
    """The real service configured with the sandbox App, and the sandbox delivering signed
    webhooks to its /api/github/webhooks."""
    api = await api_factory(github_settings)
    github_sandbox.deliver_to(str(api.raw.make_url("/api/github/webhooks")))
    return api


class FakeTime:
    """An epoch clock and an async sleep that only moves it (records every wait), so
    retry, rate-limit and pacing tests never really wait."""

    def __init__(self, start: float | None = None) -> None:
        import time

        self.now = time.time() if start is None else start
        self.sleeps: list[float] = []

    def clock(self) -> float:
        return self.now

    async def sleep(self, seconds: float) -> None:
        import asyncio

        self.sleeps.append(seconds)
        self.now += seconds
        await asyncio.sleep(0)


@pytest.fixture
def fake_time() -> FakeTime:
    return FakeTime()
