"""Registering the GitHub App from its manifest (`app.yml`), as Probot does it.

The manifest flow: a form that posts the manifest to GitHub, a redirect back with a one-time
code, and `POST /app-manifests/{code}/conversions`, which answers with the App's id, private
key and webhook secret.
https://docs.github.com/en/apps/sharing-github-apps/registering-a-github-app-from-a-manifest
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import quote

import aiohttp

from bot.config_values import Secret
from bot.errors import SteelframeError
from bot.github.client import USER_AGENT
from bot.github.transport import ACCEPT

PUBLIC_GITHUB_API = "https://api.github.com"
CONVERSION_TIMEOUT_SECONDS = 30.0


class RegistrationError(SteelframeError):
    status = 502
    code = "registration_failed"


@dataclass(frozen=True)
class AppCredentials:
    """What GitHub hands back for a registered App (secrets masked in every repr)."""

    id: int
    slug: str
    name: str
    html_url: str
    owner: str
    private_key: Secret
    webhook_secret: Secret


def github_web_url(api_url: str) -> str:
    """Where GitHub's pages live for this API: github.com, a GHE host, or the sandbox (which
    serves its pages beside its API)."""
    api_url = api_url.rstrip("/")
    if api_url == PUBLIC_GITHUB_API:
        return "https://github.com"
    return api_url.removesuffix("/api/v3")


def new_app_url(api_url: str, *, organization: str | None, state: str) -> str:
    """The page the manifest form posts to: the user's Apps, or an organization's."""
    web = github_web_url(api_url)
    owner = f"/organizations/{quote(organization)}" if organization else ""
    return f"{web}{owner}/settings/apps/new?state={quote(state)}"


def app_manifest(
    template: Mapping[str, Any], *, webhook_url: str, redirect_url: str, name: str | None = None
) -> dict[str, Any]:
    """`app.yml` with this service's URLs filled in; everything else as the file says."""
    manifest = dict(template)
    hook = dict(manifest.get("hook_attributes") or {})
    hook["url"] = webhook_url
    manifest["hook_attributes"] = hook
    manifest["redirect_url"] = redirect_url
    if name:
        manifest["name"] = name
    return manifest


async def exchange_code(session: aiohttp.ClientSession, api_url: str, code: str) -> AppCredentials:
    """Trade the one-time code for the App's credentials (no authentication: the code is)."""
    url = f"{api_url.rstrip('/')}/app-manifests/{quote(code, safe='')}/conversions"
    headers = {"Accept": ACCEPT, "User-Agent": USER_AGENT}
    timeout = aiohttp.ClientTimeout(total=CONVERSION_TIMEOUT_SECONDS)
    try:
        async with session.post(url, headers=headers, timeout=timeout) as response:
            if response.status == 404 and api_url.rstrip("/").endswith("/api/v3"):
                # GHE_HOST makes the API URL https://HOST/api/v3: a host that serves its API
                # elsewhere (the local sandbox does, at its root) answers 404 here.
                raise RegistrationError(
                    f"{api_url} answered 404 to the code exchange: if GHE_HOST points at a "
                    "server whose API is not under /api/v3 (the local sandbox's is at its "
                    "root), set GITHUB_API_URL (or --github-url) to its API instead; "
                    "otherwise the code was used or expired: register again"
                )
            if response.status != 201:
                raise RegistrationError(
                    f"GitHub answered {response.status} to the code exchange; the code is "
                    "single-use and expires after an hour: register again"
                )
            body = await response.json()
    except (aiohttp.ClientError, TimeoutError) as exc:
        raise RegistrationError(f"could not reach GitHub at {api_url}: {exc}") from exc
    try:
        return AppCredentials(
            id=int(body["id"]),
            slug=str(body["slug"]),
            name=str(body["name"]),
            html_url=str(body["html_url"]),
            owner=str(body["owner"]["login"]),
            private_key=Secret(str(body["pem"])),
            webhook_secret=Secret(str(body["webhook_secret"])),
        )
    except (KeyError, TypeError, ValueError) as exc:
        raise RegistrationError(f"GitHub's answer lacks {exc}") from exc


def write_credentials(
    credentials: AppCredentials,
    *,
    env_file: Path,
    key_dir: Path | None = None,
    where: Mapping[str, str] | None = None,
) -> tuple[Path, Path]:
    """Keep the private key in its own file in `key_dir` (default: beside `.env`) and point
    `.env` at it; both readable by the owner only (0600). `where` adds the variables naming
    the GitHub the App lives on (GITHUB_API_URL or GHE_HOST). Other lines of `.env` stay."""
    folder = (key_dir or env_file.parent).expanduser().resolve()
    key_path = folder / f"{credentials.slug}.private-key.pem"
    _write_private(key_path, credentials.private_key.reveal())
    updates = {
        "APP_ID": str(credentials.id),
        "PRIVATE_KEY_PATH": str(key_path),
        "WEBHOOK_SECRET": credentials.webhook_secret.reveal(),
        **(where or {}),
    }
    _write_private(env_file, _updated_env(env_file, updates, drop={"PRIVATE_KEY"}))
    return env_file, key_path


def _updated_env(path: Path, updates: dict[str, str], *, drop: set[str]) -> str:
    lines = path.read_text().splitlines() if path.exists() else []
    kept: list[str] = []
    for line in lines:
        name = line.removeprefix("export ").split("=", 1)[0].strip()
        if name in updates or name in drop:
            continue
        kept.append(line)
    kept.extend(f"{name}={_quoted(value)}" for name, value in updates.items())
    return "\n".join(kept) + "\n"


def _quoted(value: str) -> str:
    if value.replace("-", "").replace("_", "").replace("/", "").replace(".", "").isalnum():
        return value
    return "'" + value.replace("'", "") + "'"


def _write_private(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    os.fchmod(descriptor, 0o600)  # an existing file keeps its mode through O_CREAT
    with os.fdopen(descriptor, "w") as handle:
        handle.write(text)
