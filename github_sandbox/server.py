"""Run a sandbox on a loopback port inside the current event loop."""

from __future__ import annotations

from dataclasses import dataclass

from aiohttp import web

from github_sandbox.app import create_sandbox_app
from github_sandbox.sandbox import Sandbox


@dataclass
class SandboxServer:
    sandbox: Sandbox
    runner: web.AppRunner
    url: str

    async def close(self) -> None:
        await self.runner.cleanup()


async def serve_sandbox(
    sandbox: Sandbox, *, host: str = "127.0.0.1", port: int = 0
) -> SandboxServer:
    """Start the sandbox's HTTP server; `port=0` picks a free one. Sets `sandbox.base_url`."""
    runner = web.AppRunner(create_sandbox_app(sandbox), access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, host, port)
    try:
        await site.start()
    except OSError:
        await runner.cleanup()  # the port is taken: leave nothing half started
        raise
    bound = runner.addresses[0][1]
    sandbox.base_url = f"http://{host}:{bound}"
    return SandboxServer(sandbox, runner, sandbox.base_url)
