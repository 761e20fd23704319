"""Registering an App from a manifest, as GitHub's manifest flow does it.

The operator's browser posts the manifest to `/settings/apps/new` (or the organization's
`/organizations/{org}/settings/apps/new`); GitHub confirms and redirects to the manifest's
`redirect_url` with a one-time `code`, which the service exchanges within an hour at
`POST /app-manifests/{code}/conversions` for the App's id, private key and webhook secret.
https://docs.github.com/en/apps/sharing-github-apps/registering-a-github-app-from-a-manifest

The sandbox holds one App: the registered App replaces the one it started with, and its
webhooks go to the manifest's hook URL, signed with the new secret.
"""

from __future__ import annotations

import json
import re
import secrets
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlencode

from github_sandbox.keys import generate_app_keys
from github_sandbox.operations import SandboxError
from github_sandbox.state import AppInfo, User

CODE_TTL_SECONDS = 3600.0  # GitHub: "You must complete this step within one hour"


@dataclass(frozen=True)
class PendingRegistration:
    manifest: dict[str, Any]
    owner: User
    expires_at: float


@dataclass(frozen=True)
class Registered:
    app: AppInfo
    private_key: str
    webhook_secret: str
    client_id: str
    client_secret: str


def parse_manifest(raw: str) -> dict[str, Any]:
    """The manifest as GitHub checks it: JSON, a name, a `url`, a hook URL when the hook is
    active, and a `redirect_url` to send the code to."""
    try:
        manifest = json.loads(raw)
    except ValueError as exc:
        raise SandboxError(422, "Invalid manifest: not JSON") from exc
    if not isinstance(manifest, dict):
        raise SandboxError(422, "Invalid manifest: expected an object")
    for key in ("url", "redirect_url"):
        if not isinstance(manifest.get(key), str) or not manifest[key].startswith("http"):
            raise SandboxError(422, f"Invalid manifest: {key} must be an http(s) URL")
    hook = manifest.get("hook_attributes") or {}
    if not isinstance(hook, dict):
        raise SandboxError(422, "Invalid manifest: hook_attributes must be an object")
    if hook.get("active", True) and not str(hook.get("url") or "").startswith("http"):
        raise SandboxError(422, "Invalid manifest: hook_attributes.url is required")
    return manifest


def redirect_with_code(manifest: dict[str, Any], code: str, state: str | None) -> str:
    query = {"code": code} | ({"state": state} if state else {})
    joiner = "&" if "?" in manifest["redirect_url"] else "?"
    return f"{manifest['redirect_url']}{joiner}{urlencode(query)}"


def slug_of(name: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", name.lower()).strip("-") or "app"


def register(pending: PendingRegistration, *, app_id: int, bot_id: int, now: float) -> Registered:
    """The App the manifest describes, with a fresh key pair and webhook secret."""
    manifest = pending.manifest
    name = str(manifest.get("name") or "GitHub App")
    slug = slug_of(name)
    private_key, public_key = generate_app_keys()
    permissions = manifest.get("default_permissions") or {}
    events = manifest.get("default_events") or []
    app = AppInfo(
        app_id,
        slug,
        name,
        pending.owner,
        User(bot_id, f"{slug}[bot]", "Bot"),
        public_key,
        now,
        events=tuple(str(event) for event in events),
        permissions={str(k): str(v) for k, v in dict(permissions).items()},
    )
    return Registered(
        app=app,
        private_key=private_key,
        webhook_secret=secrets.token_hex(20),
        client_id=f"Iv1.{secrets.token_hex(8)}",
        client_secret=secrets.token_hex(20),
    )
