"""GitHub's App manifest flow, sandbox side: a manifest posted to GitHub's form becomes a
one-time code, and `POST /app-manifests/{code}/conversions` exchanges that code for the App's
credentials (id, private key, webhook secret, OAuth client id and secret).
https://docs.github.com/en/apps/sharing-github-apps/registering-a-github-app-from-a-manifest

As on GitHub, a conversion creates a NEW App (App 2, 3…: `apps.py`) with the manifest's name,
permissions and events, its own key pair, and its own webhook to the manifest's hook URL
signed with a new secret (pinged at once, as GitHub does). The sandbox's first App, the one
a running `steelframe dev` authenticates as, is left as it was."""

from __future__ import annotations

import json
import secrets
from typing import Any
from urllib.parse import urlencode

from github_sandbox.apps import check_name_free, register_app
from github_sandbox.operations import SandboxError, not_found, validation_failed
from github_sandbox.sandbox import Sandbox

CODE_TTL_SECONDS = 3600.0  # GitHub: the code must be exchanged within one hour


def parse_manifest(raw: str) -> dict[str, Any]:
    """The manifest as GitHub's form checks it: JSON, a `url`, a hook URL when the hook is
    active, and a `redirect_url` to send the code to."""
    try:
        manifest = json.loads(raw)
    except ValueError as exc:
        raise SandboxError(422, "Invalid manifest: not JSON") from exc
    if not isinstance(manifest, dict):
        raise SandboxError(422, "Invalid manifest: expected an object")
    for key in ("url", "redirect_url"):
        if not str(manifest.get(key) or "").startswith(("http://", "https://")):
            raise SandboxError(422, f"Invalid manifest: {key} must be an http(s) URL")
    hook = manifest.get("hook_attributes") or {}
    if not isinstance(hook, dict):
        raise SandboxError(422, "Invalid manifest: hook_attributes must be an object")
    if hook.get("active", True) and not str(hook.get("url") or "").startswith("http"):
        raise SandboxError(422, "Invalid manifest: hook_attributes.url is required")
    return manifest


def manifest_code(sandbox: Sandbox, manifest: dict[str, Any], owner: str | None = None) -> str:
    """What GitHub does when the manifest form is posted and the user confirms: a code,
    handed to the manifest's redirect URL, valid for one conversion within the hour. The App
    will belong to `owner` (an organization's form), else to the sandbox's user."""
    if not isinstance(manifest.get("url"), str):
        raise validation_failed("url", "missing_field", resource="Manifest")
    if isinstance(manifest.get("name"), str) and manifest["name"].strip():
        check_name_free(sandbox.world, manifest["name"].strip())
    now = sandbox.clock()
    sandbox.manifest_codes = {
        code: pending for code, pending in sandbox.manifest_codes.items() if pending[1] > now
    }
    code = secrets.token_hex(10)
    owner_login = owner or sandbox.world.app.owner.login
    sandbox.manifest_codes[code] = (manifest, now + CODE_TTL_SECONDS, owner_login)
    return code


def redirect_with_code(manifest: dict[str, Any], code: str, state: str | None) -> str:
    query = {"code": code} | ({"state": state} if state else {})
    joiner = "&" if "?" in manifest["redirect_url"] else "?"
    return f"{manifest['redirect_url']}{joiner}{urlencode(query)}"


def convert(sandbox: Sandbox, code: str) -> dict[str, Any]:
    manifest, expires_at, owner = sandbox.manifest_codes.pop(code, ({}, 0.0, ""))
    if expires_at <= sandbox.clock():  # unknown, already exchanged, or expired
        raise not_found()
    kind = "Organization" if owner != sandbox.world.app.owner.login else "User"
    account = sandbox.world.users.get(owner.lower()) or sandbox.world.user(owner, kind=kind)
    app, private_pem = register_app(sandbox.world, manifest, account, sandbox.clock())
    if app.hook_url:
        sandbox.ping(app)
    return {
        **sandbox.shapes.app(app),
        "client_id": f"Iv1.{secrets.token_hex(8)}",
        "client_secret": secrets.token_hex(20),
        "webhook_secret": app.hook_secret,
        "pem": private_pem,
    }
