"""The egress proxy's edges, tried by a hostile runtime in the real sandbox (bubblewrap, the
relay, the worker's proxy; `tests/fakes/coding/prober.py`, `egress_tricks`): IPv6 addresses
that carry a loopback IPv4 one and site-local ones (allowlisted by an operator's mistake),
odd spellings of a local name, an allowed address on another port, URLs that name the
allowed server only in their userinfo or fragment, a redirect from the allowed server to a
host service, HTTP/2 and WebSocket upgrades through the plain proxy. None gets through, and
each is refused by the proxy's policy (a 4xx with its reason), not by luck of routing."""

from __future__ import annotations

import json
import re
import uuid
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from aiohttp import web

from tests.fakes.coding import command
from tests.fakes.lifecycle import Make
from tests.fakes.lifecycle import make_fixture as make_fixture  # the `make` fixture
from tests.fakes.sandbox import exchange_dir, require_bwrap
from tests.fakes.served import served

# Literals the operator allowlisted by mistake (with the services' ports): each carries
# 127.0.0.1, or is site-local (prober.EMBEDDED_LOOPBACK).
EMBEDDED = (
    "[2002:7f00:1::1]",
    "[64:ff9b::7f00:1]",
    "[64:ff9b:1::7f00:1]",
    "[::7f00:1]",
    "[::ffff:0:7f00:1]",
    "[2001:0:7f00:1::1]",
    "[fec0::1]",
)
PORTS = {"redis": 6379, "database": 5432}


@pytest.fixture
async def allowed_server() -> AsyncIterator[int]:
    """The one server the run may reach: it redirects wherever it is asked to, and answers
    a WebSocket upgrade."""

    async def redirect(request: web.Request) -> web.Response:
        raise web.HTTPFound(request.query["to"])

    async def upgrade(request: web.Request) -> web.WebSocketResponse:
        socket = web.WebSocketResponse()
        await socket.prepare(request)
        await socket.close()
        return socket

    app = web.Application()
    app.router.add_get("/redirect", redirect)
    app.router.add_get("/upgrade", upgrade)
    async with served(app) as port:
        yield port


@pytest.mark.slow
async def test_no_trick_through_the_egress_proxy_reaches_a_host_service(
    make: Make, tmp_path: Path, allowed_server: int
) -> None:
    require_bwrap()
    ports_file = exchange_dir(tmp_path) / "ports.json"
    ports_file.write_text(json.dumps(PORTS))
    marker = exchange_dir(tmp_path) / f"unused-{uuid.uuid4().hex}"
    mistakes = [f"{host}:{port}" for host in (*EMBEDDED, "localhost") for port in PORTS.values()]
    lc = await make(
        coding_command=command("prober", ports_file, marker, allowed_server),
        coding_network="allowlist",
        egress_allow=tuple(mistakes),
        egress_private=(f"127.0.0.1:{allowed_server}",),
    )
    issue = await lc.open_issue("Probe the proxy")
    await lc.work()
    task = lc.task(issue)
    log = await (await lc.api.get(f"/api/operator/tasks/{task.id}/log")).json()
    said = "\n".join(run["text"] for run in log["runs"])
    attempts = dict(re.findall(r"ATTEMPT (\w+): (SUCCEEDED|blocked \(.*\))", said))
    assert len(attempts) > 70, said
    assert [name for name, v in attempts.items() if not v.startswith("blocked")] == [], said
    refused = {name: v for name, v in attempts.items() if re.search(r"HTTP/1.1 4\d\d ", v)}
    assert sorted(set(attempts) - set(refused)) == [], said  # no 502: none was even tried
    for target, port in PORTS.items():
        for index, host in enumerate(EMBEDDED):
            for how in ("connect", "plain"):
                verdict = attempts[f"{target}_trick_{how}_{index}"]
                kind = "private" if host == "[fec0::1]" else "loopback"
                assert f"{host}:{port} resolves to a {kind} address" in verdict, verdict
        assert "403" in attempts[f"{target}_redirect"], said
        assert "resolves to a loopback address" in attempts[f"{target}_redirect_6to4"], said
        assert "not on this run's allowlist" in attempts[f"{target}_allowed_host_other_port"]
