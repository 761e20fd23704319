"""The typed application keys the sandbox's routes find their state under."""

from __future__ import annotations

from aiohttp import web

from github_sandbox.sandbox import Sandbox

SANDBOX = web.AppKey("sandbox", Sandbox)
# Requests per credential (the Authorization header), for the rate-limit answers.
USAGE = web.AppKey("usage", dict[str, int])
