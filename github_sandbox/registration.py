"""GitHub's App manifest flow, sandbox side: a manifest posted to GitHub becomes a one-time
code, and `POST /app-manifests/{code}/conversions` exchanges that code for the App's
credentials (id, private key, webhook secret, OAuth client id and secret).

The sandbox has one App: a conversion registers the manifest as that App (its name,
permissions, events and webhook) with a fresh key pair, so JWTs signed with the returned
key are the ones it accepts from then on."""

from __future__ import annotations

import secrets
from typing import Any

from github_sandbox.keys import generate_app_keys
from github_sandbox.operations import not_found, validation_failed
from github_sandbox.sandbox import Sandbox


def manifest_code(sandbox: Sandbox, manifest: dict[str, Any]) -> str:
    """What GitHub does when the manifest form is posted and the user confirms: a code,
    handed to the manifest's redirect URL, valid for one conversion."""
    if not isinstance(manifest.get("url"), str):
        raise validation_failed("url", "missing_field", resource="Manifest")
    code = secrets.token_hex(10)
    sandbox.manifest_codes[code] = manifest
    return code


def convert(sandbox: Sandbox, code: str) -> dict[str, Any]:
    manifest = sandbox.manifest_codes.pop(code, None)
    if manifest is None:  # unknown, or already exchanged
        raise not_found()
    app = sandbox.world.app
    private_pem, public_pem = generate_app_keys()
    app.public_key_pem = public_pem
    if isinstance(manifest.get("name"), str) and manifest["name"].strip():
        app.name = manifest["name"].strip()
    permissions = manifest.get("default_permissions")
    if isinstance(permissions, dict):
        app.permissions = {str(k): str(v) for k, v in permissions.items()}
    events = manifest.get("default_events")
    if isinstance(events, list):
        app.events = tuple(str(e) for e in events)
    webhook_secret = secrets.token_hex(20)
    hook = manifest.get("hook_attributes")
    if isinstance(hook, dict) and isinstance(hook.get("url"), str):
        sandbox.hooks.configure(hook["url"], webhook_secret)
    return {
        **sandbox.shapes.app(app),
        "client_id": f"Iv1.{secrets.token_hex(8)}",
        "client_secret": secrets.token_hex(20),
        "webhook_secret": webhook_secret,
        "pem": private_pem,
    }
