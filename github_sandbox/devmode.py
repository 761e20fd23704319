"""The sandbox as `steelframe dev` runs it: a fresh App key pair and webhook secret, the App
installed on the configured repository (with a bare git repo holding an initial commit),
and its world kept on disk between runs."""

from __future__ import annotations

import secrets
from dataclasses import dataclass
from pathlib import Path

from github_sandbox.keys import generate_app_keys
from github_sandbox.sandbox import Sandbox
from github_sandbox.server import SandboxServer, serve_sandbox

DEV_APP_ID = 1


@dataclass
class DevSandbox:
    server: SandboxServer
    app_id: int
    private_key: str
    webhook_secret: str

    @property
    def url(self) -> str:
        return self.server.url

    def deliver_to(self, url: str) -> None:
        self.server.sandbox.set_webhook(url, self.webhook_secret)

    async def close(self) -> None:
        await self.server.close()


async def start_dev_sandbox(
    root: Path, repo: str, *, webhook_secret: str | None = None, host: str = "127.0.0.1"
) -> DevSandbox:
    private_key, public_key = generate_app_keys()
    sandbox = Sandbox(
        app_id=DEV_APP_ID,
        public_key_pem=public_key,
        root=root / "git",
        state_path=root / "world.pickle",
    )
    server = await serve_sandbox(sandbox, host=host)
    owner = repo.split("/", 1)[0]
    installation = next(
        (i for i in sandbox.world.installations.values() if i.account.login == owner), None
    )
    if installation is None:
        installation = sandbox.install(owner, notify=False)
    sandbox.add_repo(repo, installation=installation, notify=False)
    sandbox.save()
    return DevSandbox(server, DEV_APP_ID, private_key, webhook_secret or secrets.token_hex(20))
