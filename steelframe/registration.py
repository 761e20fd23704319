"""`steelframe github register`: a local page that registers the GitHub App from `app.yml`.

As Probot does it: the page posts the manifest (with this service's URLs) to GitHub, GitHub
redirects back to `/callback` with a code, the code is exchanged for the App's credentials,
and they are written to `.env` (the key in its own file, both mode 0600). The key goes
outside the checkout by default (`~/.config/steelframe/`), so `git add -A` cannot commit it.
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import html
import json
import os
import secrets
import sys
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import aiohttp
import yaml
from aiohttp import web

from bot.config import Settings
from bot.errors import SteelframeError
from bot.github.manifest import (
    PUBLIC_GITHUB_API,
    AppCredentials,
    app_manifest,
    exchange_code,
    new_app_url,
    write_credentials,
)
from steelframe.cli import load_settings
from steelframe.secrets_in_git import committable


@dataclass
class Registration:
    """One registration: the manifest, the form target, and the credentials once back."""

    settings: Settings
    manifest_template: dict[str, Any]
    args: argparse.Namespace
    state: str = field(default_factory=lambda: secrets.token_urlsafe(16))
    done: asyncio.Future[AppCredentials] | None = None
    written: tuple[Path, Path] | None = None

    def manifest(self, page_url: str) -> dict[str, Any]:
        return app_manifest(
            self.manifest_template,
            webhook_url=self.webhook_url(),
            redirect_url=f"{page_url}/callback",
            name=self.args.name,
        )

    def webhook_url(self) -> str:
        if self.args.webhook_url:
            return str(self.args.webhook_url)
        if self.settings.webhook_proxy_url:
            return self.settings.webhook_proxy_url
        if self.settings.public_url:
            return f"{self.settings.public_url}/api/github/webhooks"
        return f"http://localhost:{self.settings.port}/api/github/webhooks"


def default_key_dir(environ: Mapping[str, str] = os.environ) -> Path:
    """Where a private key lives unless told otherwise: the user's configuration folder,
    never the working directory (which is usually a git checkout)."""
    config_home = environ.get("XDG_CONFIG_HOME") or str(Path.home() / ".config")
    return Path(config_home).expanduser() / "steelframe"


def github_variables(settings: Settings) -> dict[str, str]:
    """The variables that name the GitHub this App was registered on, for `.env`: GHE_HOST
    (and GHE_PROTOCOL) as configured, else GITHUB_API_URL unless it is github.com's."""
    if settings.ghe_host and settings.sources.get("github_api_url", "").startswith("GHE_HOST"):
        found = {"GHE_HOST": settings.ghe_host}
        if settings.ghe_protocol != "https":
            found["GHE_PROTOCOL"] = settings.ghe_protocol
        return found
    if settings.github_api_url.rstrip("/") == PUBLIC_GITHUB_API:
        return {}
    return {"GITHUB_API_URL": settings.github_api_url.rstrip("/")}


def with_github_url(settings: Settings, url: str | None) -> Settings:
    """`--github-url` wins over GITHUB_API_URL and GHE_HOST."""
    if not url:
        return settings
    sources = {**settings.sources, "github_api_url": "--github-url"}
    return dataclasses.replace(settings, github_api_url=url.rstrip("/"), sources=sources)


def _write(registration: Registration, credentials: AppCredentials) -> tuple[Path, Path]:
    key_dir: Path = registration.args.key_dir or default_key_dir()
    key_dir.mkdir(mode=0o700, parents=True, exist_ok=True)
    return write_credentials(
        credentials,
        env_file=Path(registration.args.env_file),
        key_dir=key_dir,
        where=github_variables(registration.settings),
    )


PAGE_KEY = web.AppKey("registration", Registration)


async def page(request: web.Request) -> web.Response:
    registration = request.app[PAGE_KEY]
    page_url = f"{request.scheme}://{request.host}"
    target = new_app_url(
        registration.settings.github_api_url,
        organization=registration.args.org,
        state=registration.state,
    )
    manifest = json.dumps(registration.manifest(page_url))
    owner = f"the organization {registration.args.org}" if registration.args.org else "your user"
    return web.Response(
        content_type="text/html",
        text=f"""<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>Register the GitHub App</title></head>
<body><main>
<h1>Register Steelframe as a GitHub App</h1>
<p>GitHub will create the App for {html.escape(owner)} from <code>{
            html.escape(registration.args.manifest)
        }</code>, then send you back here; the credentials are written to
<code>{html.escape(registration.args.env_file)}</code>.</p>
<form action="{html.escape(target)}" method="post">
<input type="hidden" name="manifest" value="{html.escape(manifest)}">
<button type="submit">Register the GitHub App</button>
</form></main></body></html>""",
    )


async def callback(request: web.Request) -> web.Response:
    registration = request.app[PAGE_KEY]
    if request.query.get("state") != registration.state:
        raise web.HTTPBadRequest(text="this registration was not started here (state mismatch)")
    code = request.query.get("code")
    if not code:
        raise web.HTTPBadRequest(text="GitHub sent no code")
    try:
        async with aiohttp.ClientSession() as session:
            credentials = await exchange_code(session, registration.settings.github_api_url, code)
    except SteelframeError as exc:
        raise web.HTTPBadGateway(text=exc.message) from exc
    registration.written = await asyncio.to_thread(_write, registration, credentials)
    assert registration.done is not None
    if not registration.done.done():
        registration.done.set_result(credentials)
    install = f"{credentials.html_url}/installations/new"
    return web.Response(
        content_type="text/html",
        text=f"""<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>GitHub App registered</title></head>
<body><main><h1>Registered {html.escape(credentials.name)}</h1>
<p>App id {credentials.id}; the credentials are in
<code>{html.escape(str(registration.written[0]))}</code>, the private key in
<code>{html.escape(str(registration.written[1]))}</code> (both readable by you only).</p>
<p>Next: <a href="{html.escape(install)}">install the App on a repository</a>, then run
<code>steelframe github check --repo OWNER/NAME</code>.</p></main></body></html>""",
    )


def registration_app(registration: Registration) -> web.Application:
    app = web.Application()
    app[PAGE_KEY] = registration
    app.add_routes([web.get("/", page), web.get("/callback", callback)])
    return app


def read_manifest(path: Path) -> dict[str, Any]:
    try:
        manifest = yaml.safe_load(path.read_text())
    except OSError as exc:
        raise SteelframeError(f"{path}: cannot read the manifest ({exc.strerror})") from exc
    except yaml.YAMLError as exc:
        raise SteelframeError(f"{path}: not valid YAML ({exc})") from exc
    if not isinstance(manifest, dict):
        raise SteelframeError(f"{path}: the manifest must be a mapping")
    return manifest


async def check_reachable(settings: Settings) -> None:
    """Ask the API before sending anyone to its form: a GitHub that cannot be reached (an
    https GHE_HOST in front of the local sandbox's plain http, say) would only fail later,
    in the browser or at the code exchange, with a message about something else."""
    url = f"{settings.github_api_url.rstrip('/')}/rate_limit"  # unauthenticated on GitHub
    try:
        async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=15)) as session:
            async with session.get(url) as response:
                await response.read()
    except (aiohttp.ClientError, TimeoutError) as exc:
        named = settings.sources.get("github_api_url", "")
        hint = ""
        if named.startswith("GHE_HOST"):
            hint = (
                f"; GHE_HOST means {settings.ghe_protocol}://{settings.ghe_host}/api/v3 (a "
                "GitHub Enterprise server): for the local sandbox, which speaks plain http "
                "with its API at its root, use --github-url http://HOST:PORT (or "
                "GITHUB_API_URL) instead"
            )
        reason = str(exc) or type(exc).__name__
        raise SteelframeError(
            f"cannot reach the GitHub API at {settings.github_api_url} ({reason}){hint}"
        ) from exc


async def run_registration(
    registration: Registration, *, say: Any = print
) -> tuple[AppCredentials, tuple[Path, Path]]:
    """Serve the page until GitHub's redirect has been handled; the credentials written."""
    await check_reachable(registration.settings)
    registration.done = asyncio.get_running_loop().create_future()
    runner = web.AppRunner(registration_app(registration), access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, registration.args.host, registration.args.port)
    await site.start()
    try:
        host, port = runner.addresses[0][:2]
        say(f"open http://{host}:{port}/ in your browser to register the GitHub App")
        credentials = await registration.done
        assert registration.written is not None
        return credentials, registration.written
    finally:
        await runner.cleanup()


def cmd_github_register(args: argparse.Namespace) -> int:
    settings = with_github_url(load_settings(), args.github_url)
    try:
        registration = Registration(settings, read_manifest(Path(args.manifest)), args)
        credentials, (env_file, key_path) = asyncio.run(
            run_registration(registration, say=lambda line: print(line, flush=True))
        )
    except SteelframeError as exc:
        print(f"steelframe: {exc.message}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("steelframe: registration cancelled; nothing was written", file=sys.stderr)
        return 130
    print(f"registered {credentials.name} (app id {credentials.id}, {credentials.slug})")
    names = ["APP_ID", "WEBHOOK_SECRET", "PRIVATE_KEY_PATH", *github_variables(settings)]
    print(f"wrote {', '.join(names)} to {env_file} (mode 0600)")
    print(f"private key: {key_path} (mode 0600)")
    for path in (env_file, key_path):
        if committable(path):
            print(
                f"warning: {path} is in a git checkout that does not ignore it: add it to "
                ".gitignore before `git add`",
                file=sys.stderr,
            )
    print(f"next: install the App: {credentials.html_url}/installations/new")
    print("then: steelframe github check --repo OWNER/NAME")
    return 0
