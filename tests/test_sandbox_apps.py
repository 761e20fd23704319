"""Apps 2, 3… on the sandbox, as GitHub has them: the manifest flow creates a new App with its
own key and webhook (the first App, the one `steelframe dev` runs as, keeps working), the
install link registration prints opens a page that installs it, and the repositories it
covers send it their webhooks, signed with its own secret."""

from __future__ import annotations

import asyncio
import json
import time
from typing import Any

import aiohttp
import jwt
import pytest
from aiohttp import web

from tests.conftest import SANDBOX_REPO, GitHubSandbox
from tests.fakes.patience import PATIENCE_SECONDS
from tests.test_github_register import install_from_page
from webhooks.signature import signature_for


def _jwt(private_key: str, app_id: int) -> str:
    now = int(time.time())
    return jwt.encode(
        {"iat": now - 60, "exp": now + 540, "iss": str(app_id)}, private_key, algorithm="RS256"
    )


class Received(list[tuple[dict[str, str], bytes]]):
    """What the receiver got, and an event set on each arrival."""

    def __init__(self) -> None:
        super().__init__()
        self.arrived = asyncio.Event()


@pytest.fixture
async def receiver(aiohttp_server: Any) -> tuple[str, Received]:
    got = Received()

    async def receive(request: web.Request) -> web.Response:
        got.append((dict(request.headers), await request.read()))
        got.arrived.set()
        return web.Response(status=202)

    app = web.Application()
    app.router.add_post("/hooks", receive)
    server = await aiohttp_server(app)
    return str(server.make_url("/hooks")), got


async def _register(github_sandbox: GitHubSandbox, name: str, hook_url: str) -> dict[str, Any]:
    manifest = {
        "name": name,
        "url": "http://localhost",
        "redirect_url": "http://localhost/callback",
        "hook_attributes": {"url": hook_url},
        "default_events": ["issues"],
    }
    async with aiohttp.ClientSession(github_sandbox.url) as session:
        form = {"manifest": json.dumps(manifest)}
        async with session.post("/settings/apps/new", data=form, allow_redirects=False) as r:
            assert r.status == 302, await r.text()
            code = r.headers["Location"].split("code=")[1]
        async with session.post(f"/app-manifests/{code}/conversions") as r:
            assert r.status == 201
            body: dict[str, Any] = await r.json()
            return body


async def _wait_for(got: Received, count: int) -> None:
    async def enough() -> None:
        while len(got) < count:
            got.arrived.clear()
            await got.arrived.wait()

    await asyncio.wait_for(enough(), PATIENCE_SECONDS)


async def test_registering_twice_makes_apps_two_and_three_and_leaves_the_first_alone(
    github_sandbox: GitHubSandbox, receiver: tuple[str, Received]
) -> None:
    world = github_sandbox.sandbox.world
    first_key, first_hook = world.app.public_key_pem, github_sandbox.sandbox.hooks.url
    second = await _register(github_sandbox, "Second", receiver[0])
    third = await _register(github_sandbox, "Third", receiver[0])
    ids = {github_sandbox.app_id, second["id"], third["id"]}
    assert len(ids) == 3 and (second["slug"], third["slug"]) == ("second", "third")
    assert second["pem"] != third["pem"] and second["webhook_secret"] != third["webhook_secret"]
    # The first App (a running dev's) still authenticates with its own key; its hook is as set.
    assert world.app.public_key_pem == first_key
    assert github_sandbox.sandbox.hooks.url == first_hook
    async with aiohttp.ClientSession(github_sandbox.url) as session:
        for key, app_id, slug in (
            (github_sandbox.private_key, github_sandbox.app_id, world.app.slug),
            (second["pem"], second["id"], "second"),
        ):
            auth = {"Authorization": f"Bearer {_jwt(key, app_id)}"}
            async with session.get("/app", headers=auth) as r:
                assert r.status == 200 and (await r.json())["slug"] == slug
        # An App's key is its own: App 2's key signing as App 3 is refused.
        auth = {"Authorization": f"Bearer {_jwt(second['pem'], third['id'])}"}
        async with session.get("/app", headers=auth) as r:
            assert r.status == 401
    # GitHub refuses a second App under a taken name, saying which flag picks another.
    async with aiohttp.ClientSession(github_sandbox.url) as session:
        manifest = {"name": "Second", "url": "http://x", "redirect_url": "http://x/cb"}
        data = {"manifest": json.dumps(manifest | {"hook_attributes": {"active": False}})}
        async with session.post("/settings/apps/new", data=data, allow_redirects=False) as r:
            assert r.status == 422 and "--name" in (await r.json())["message"]


async def test_the_printed_install_link_installs_the_new_app_and_its_repos_reach_its_webhook(
    github_sandbox: GitHubSandbox, receiver: tuple[str, Received]
) -> None:
    hook_url, got = receiver
    second = await _register(github_sandbox, "Second", hook_url)
    await _wait_for(got, 1)  # the ping
    async with aiohttp.ClientSession() as session:
        async with session.get(second["html_url"]) as r:  # the App's own page
            assert r.status == 200 and "Second" in await r.text()
        page = await install_from_page(
            session, f"{second['html_url']}/installations/new", SANDBOX_REPO
        )
    assert SANDBOX_REPO in page
    await _wait_for(got, 2)
    headers, body = got[1]
    created = json.loads(body)
    assert (headers["X-GitHub-Event"], created["action"]) == ("installation", "created")
    assert headers["X-Hub-Signature-256"] == signature_for(second["webhook_secret"], body)
    installation_id = created["installation"]["id"]
    assert installation_id != github_sandbox.installation_id
    assert created["installation"]["app_id"] == second["id"]

    # App 2 finds its installation, gets a token, and acts as its own bot.
    async with aiohttp.ClientSession(github_sandbox.url) as session:
        auth = {"Authorization": f"Bearer {_jwt(second['pem'], second['id'])}"}
        async with session.get(f"/repos/{SANDBOX_REPO}/installation", headers=auth) as r:
            assert (await r.json())["id"] == installation_id
        path = f"/app/installations/{github_sandbox.installation_id}/access_tokens"
        async with session.post(path, headers=auth) as r:
            assert r.status == 404  # the first App's installation is not App 2's
        path = f"/app/installations/{installation_id}/access_tokens"
        async with session.post(path, headers=auth) as r:
            token = (await r.json())["token"]
        issue = {"title": "from app two"}
        async with session.post(
            f"/repos/{SANDBOX_REPO}/issues", json=issue, headers={"Authorization": f"token {token}"}
        ) as r:
            assert r.status == 201 and (await r.json())["user"]["login"] == "second[bot]"
    # The issue's webhook reaches App 2 with its installation (and the first App as before).
    await _wait_for(got, 3)
    headers, body = got[2]
    opened = json.loads(body)
    assert (headers["X-GitHub-Event"], opened["action"]) == ("issues", "opened")
    assert opened["installation"]["id"] == installation_id
    assert headers["X-GitHub-Hook-Installation-Target-ID"] == str(second["id"])
    # An event App 2 did not subscribe to (a comment) is not sent to it; the first App's is.
    async with aiohttp.ClientSession(github_sandbox.url) as session:
        comment = f"/repos/{SANDBOX_REPO}/issues/{opened['issue']['number']}/comments"
        auth = {"Authorization": f"token {token}"}
        async with session.post(comment, json={"body": "hi"}, headers=auth) as r:
            assert r.status == 201
    await github_sandbox.settle()
    first = [d.event for d in github_sandbox.sandbox.hooks.sent]
    assert first[-2:] == ["issues", "issue_comment"]
    await asyncio.wait_for(
        github_sandbox.sandbox.other_hooks.sender_for(second["id"]).settle(), PATIENCE_SECONDS
    )
    assert [h["X-GitHub-Event"] for h, _ in got] == ["ping", "installation", "issues"]


async def test_the_install_form_refuses_a_post_that_did_not_come_from_its_page(
    github_sandbox: GitHubSandbox, receiver: tuple[str, Received]
) -> None:
    second = await _register(github_sandbox, "Second", receiver[0])
    github_sandbox.sandbox.add_repo("someone-else/thing")
    installations = dict(github_sandbox.sandbox.world.installations)
    async with aiohttp.ClientSession(github_sandbox.url) as session:
        form = {"token": "forged", "repos": SANDBOX_REPO}
        async with session.post("/apps/second/installations", data=form) as r:
            assert r.status == 403 and "did not come from" in await r.text()
        async with session.get("/apps/second/installations/new") as r:
            token = (await r.text()).split('name="token" value="')[1].split('"')[0]
        two_accounts = [("token", token), ("repos", SANDBOX_REPO), ("repos", "someone-else/thing")]
        async with session.post("/apps/second/installations", data=two_accounts) as r:
            assert r.status == 400 and "one account" in (await r.json())["message"]
        async with session.post("/apps/second/installations", data={"token": token}) as r:
            assert r.status == 400
        async with session.get("/apps/no-such-app/installations/new") as r:
            assert r.status == 404
    assert github_sandbox.sandbox.world.installations == installations  # nothing changed
    assert second["id"] in github_sandbox.sandbox.world.other_apps


async def test_installing_the_first_app_from_its_page_grants_the_repository(
    github_sandbox: GitHubSandbox,
) -> None:
    repo = github_sandbox.sandbox.add_repo("octo-org/gadgets")
    slug = github_sandbox.sandbox.world.app.slug
    async with aiohttp.ClientSession() as session:
        url = f"{github_sandbox.url}/apps/{slug}/installations/new"
        await install_from_page(session, url, "octo-org/gadgets")
        again = await install_from_page(session, url, "octo-org/gadgets")  # idempotent
    assert "octo-org/gadgets" in again
    assert repo.installation_id is not None
    inst = github_sandbox.sandbox.world.installations[repo.installation_id]
    assert inst.repos == {"octo-org/gadgets"}
    client = github_sandbox.client()
    assert await client.installation_token("octo-org/gadgets")
