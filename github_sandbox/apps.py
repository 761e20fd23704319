"""Apps 2, 3… on the sandbox: registered through the manifest flow as GitHub registers them
(a new App with its own id, slug, bot user, key pair and webhook, never the first App
re-keyed), installed from their install page, and sent the webhooks of the repositories
their installations cover.

The first App (`World.app`) keeps its own paths: `steelframe dev` and the tests run as it,
point its webhook with the control API, and its installation is the one a repository names
(`Repo.installation_id`). Another App reaches a repository through its installation's
`repos`, exactly as a token's reach is checked for any installation."""

from __future__ import annotations

import copy
import re
import secrets
from typing import Any

from github_sandbox.hooks import Delivery, HookSender
from github_sandbox.keys import generate_app_keys
from github_sandbox.operations import HookEvent, SandboxError
from github_sandbox.shapes import node_id
from github_sandbox.state import AppInfo, Installation, Repo, User, World

# Sent to every App whatever it subscribed to (GitHub: "always delivered").
ALWAYS_DELIVERED = frozenset({"ping", "installation", "installation_repositories"})


def slug_for(name: str) -> str:
    """GitHub's slug: the name lower-cased, each run of other characters one hyphen."""
    return re.sub(r"[^a-z0-9]+", "-", name.lower()).strip("-") or "app"


def check_name_free(world: World, name: str) -> None:
    """GitHub refuses a second App with a taken name (its form says so before creating)."""
    if world.app_by_slug(slug_for(name)) is not None:
        raise SandboxError(
            422,
            f"Name has already been taken: an App called {name!r} exists on this GitHub; "
            "register under another name (steelframe github register --name NAME)",
        )


def take_manifest(app: AppInfo, manifest: dict[str, Any]) -> None:
    """The permissions and events a manifest asks for become `app`'s (as GitHub registers
    them: `default_permissions`, `default_events`)."""
    permissions = manifest.get("default_permissions")
    if isinstance(permissions, dict):
        app.permissions = {str(k): str(v) for k, v in permissions.items()}
    events = manifest.get("default_events")
    if isinstance(events, list):
        app.events = tuple(str(e) for e in events)


def register_app(
    world: World, manifest: dict[str, Any], owner: User, now: float
) -> tuple[AppInfo, str]:
    """A new App from a manifest, owned by `owner`: its id, bot, key pair and webhook. The
    private key (PEM) is handed back once and never kept, as GitHub does."""
    name = str(manifest.get("name") or "").strip() or f"app-{secrets.token_hex(3)}"
    check_name_free(world, name)
    slug = slug_for(name)
    app_id = world.next_id()
    bot = world.user(f"{slug}[bot]", kind="Bot")
    private_pem, public_pem = generate_app_keys()
    app = AppInfo(app_id, slug, name, owner, bot, public_pem, now)
    take_manifest(app, manifest)
    hook = manifest.get("hook_attributes")
    if isinstance(hook, dict) and isinstance(hook.get("url"), str) and hook.get("active", True):
        app.hook_url = hook["url"]
        app.hook_secret = secrets.token_hex(20)
    world.other_apps[app.id] = app
    return app, private_pem


def installation_on(world: World, app: AppInfo, repo: Repo) -> Installation | None:
    """`app`'s installation that covers `repo` (GET /repos/{owner}/{repo}/installation)."""
    if app is world.app:
        if repo.installation_id is None:
            return None
        return world.installations.get(repo.installation_id)
    name = repo.full_name.lower()
    return next((i for i in world.installations_of(app) if name in i.repos), None)


def install_other_app(
    world: World, app: AppInfo, account: User, repos: list[Repo], now: float
) -> Installation:
    """Install App 2, 3… on `account` for `repos` (one installation per account: installing
    again adds the repositories to it, as GitHub's "Configure" page does)."""
    found = next((i for i in world.installations_of(app) if i.account is account), None)
    if found is None:
        found = Installation(world.next_id(), account, now, app_id=app.id)
        world.installations[found.id] = found
    found.repos |= {repo.full_name.lower() for repo in repos}
    return found


class AppHooks:
    """The webhook senders of Apps 2, 3…, each to the URL its manifest named, signed with
    its own secret; the first App's sender stays the sandbox's `hooks`."""

    def __init__(self) -> None:
        self.senders: dict[int, HookSender] = {}

    def sender(self, app: AppInfo) -> HookSender:
        found = self.senders.get(app.id)
        if found is None:
            found = self.senders[app.id] = HookSender(app_id=app.id)
        found.configure(app.hook_url, app.hook_secret)
        return found

    def sender_for(self, app_id: int) -> HookSender:
        return self.senders[app_id]

    def fan_out(self, world: World, events: list[HookEvent]) -> list[Delivery]:
        """Each event on a repository, to every other App installed on it (with that App's
        installation in the payload), when the App subscribed to the event."""
        deliveries: list[Delivery] = []
        for app in world.other_apps.values():
            wanted = []
            for event in events:
                repo = (event.payload.get("repository") or {}).get("full_name")
                inst = _covering(world, app, repo)
                if inst is None or not subscribed(app, event.event):
                    continue
                payload = copy.deepcopy(event.payload)
                payload["installation"] = {
                    "id": inst.id,
                    "node_id": node_id("Installation", inst.id),
                }
                wanted.append(HookEvent(event.event, payload))
            if wanted:
                deliveries += self.sender(app).enqueue(wanted)
        return deliveries

    async def close(self) -> None:
        for sender in self.senders.values():
            await sender.close()


def subscribed(app: AppInfo, event: str) -> bool:
    return event in ALWAYS_DELIVERED or event in app.events


def _covering(world: World, app: AppInfo, full_name: object) -> Installation | None:
    if not isinstance(full_name, str):
        return None
    name = full_name.lower()
    return next(
        (i for i in world.installations_of(app) if name in i.repos and i.suspended_at is None),
        None,
    )
