"""The sandbox as `steelframe dev` runs it: a fresh App key pair and webhook secret, the App
installed on the configured repository (with a bare git repo holding an initial commit),
and its world kept on disk between runs, on the same port (links stored from the last run
keep working)."""

from __future__ import annotations

import logging
import os
import secrets
from dataclasses import dataclass
from pathlib import Path

from github_sandbox.keys import generate_app_keys
from github_sandbox.sandbox import Sandbox
from github_sandbox.server import SandboxServer, serve_sandbox

log = logging.getLogger(__name__)
DEV_APP_ID = 1
PORT_FILE = "port"
# The control API's secret for this run, for the developer's tools (readable by them only).
CONTROL_SECRET_FILE = "control-secret"


@dataclass
class DevSandbox:
    server: SandboxServer
    app_id: int
    private_key: str
    webhook_secret: str

    @property
    def url(self) -> str:
        return self.server.url

    @property
    def control_secret(self) -> str:
        return self.server.sandbox.control_secret

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
    server = await _serve_on_kept_port(sandbox, root / PORT_FILE, host)
    owner = repo.split("/", 1)[0]
    installation = next(
        (i for i in sandbox.world.installations.values() if i.account.login == owner), None
    )
    if installation is None:
        installation = sandbox.install(owner, notify=False)
    sandbox.add_repo(repo, installation=installation, notify=False)
    sandbox.save()
    _write_secret(root / CONTROL_SECRET_FILE, sandbox.control_secret)
    return DevSandbox(server, DEV_APP_ID, private_key, webhook_secret or secrets.token_hex(20))


def _write_secret(path: Path, secret: str) -> None:
    path.unlink(missing_ok=True)
    descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(descriptor, "w") as file:
        file.write(secret)


async def _serve_on_kept_port(sandbox: Sandbox, port_file: Path, host: str) -> SandboxServer:
    """Serve on the port the last run of this data directory used; a free one the first
    time, or when another process holds it now (the links of the last run then point at
    that process, and the log says so)."""
    kept = _kept_port(port_file)
    server: SandboxServer | None = None
    if kept is not None:
        try:
            server = await serve_sandbox(sandbox, host=host, port=kept)
        except OSError as exc:
            log.warning(
                "sandbox: port %s of the last run is taken (%s); links from that run will "
                "not open until it is free",
                kept,
                exc.strerror or exc,
            )
    if server is None:
        server = await serve_sandbox(sandbox, host=host)
    _keep_port(port_file, int(server.url.rsplit(":", 1)[1]))
    return server


def _keep_port(port_file: Path, port: int) -> None:
    port_file.parent.mkdir(parents=True, exist_ok=True)
    port_file.write_text(f"{port}\n")


def _kept_port(port_file: Path) -> int | None:
    try:
        port = int(port_file.read_text().strip())
    except (OSError, ValueError):
        return None
    return port if 0 < port < 65536 else None
