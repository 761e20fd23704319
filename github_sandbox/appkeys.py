"""The typed application key the sandbox's routes find their `Sandbox` under."""

from __future__ import annotations

from aiohttp import web

from github_sandbox.sandbox import Sandbox

SANDBOX = web.AppKey("sandbox", Sandbox)
