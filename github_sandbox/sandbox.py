"""`Sandbox`: the world, its rules, injected faults and webhook sender behind one object,
with the seeding calls tests and `steelframe dev` use (install the App, add a repository
with a bare git repo, grant a collaborator, hand out a user token)."""

from __future__ import annotations

import secrets
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import msgspec

from github_sandbox import git
from github_sandbox.apps import AppHooks, take_manifest
from github_sandbox.auth import TOKEN_TTL_SECONDS, Presented, issue_user_token
from github_sandbox.faults import FaultPlan
from github_sandbox.hooks import Delivery, HookSender
from github_sandbox.operations import HookEvent, Operations
from github_sandbox.persistence import load_world, save_world
from github_sandbox.shapes import Shapes
from github_sandbox.state import AppInfo, Installation, Repo, User, World, iso

DEFAULT_SLUG = "steelframe-sandbox"
PROJECT_MANIFEST = Path(__file__).resolve().parents[1] / "app.yml"
ZEN = "Keep it logically awesome."


def project_manifest() -> Path | None:
    """Steelframe's App manifest beside the sandbox's package, when it runs from a checkout."""
    return PROJECT_MANIFEST if PROJECT_MANIFEST.is_file() else None


@dataclass
class Exchange:
    """One request the sandbox served, kept for contract checks in tests."""

    method: str
    route: str  # the route template, e.g. /repos/{owner}/{repo}/issues
    path: str
    query: dict[str, str]
    status: int
    request: Any
    response: Any
    injected: bool = False  # answered by an injected fault, not by the endpoint
    credential: Presented | None = None  # the token (its scope) that the request carried
    headers: dict[str, str] = field(default_factory=dict)  # the answer's headers


@dataclass
class Sandbox:
    app_id: int
    public_key_pem: str
    root: Path
    app_slug: str = DEFAULT_SLUG
    clock: Callable[[], float] = time.time
    token_ttl: float = TOKEN_TTL_SECONDS
    base_url: str = "http://127.0.0.1"
    record: bool = False
    # Where `steelframe dev` keeps the world between runs (None: memory only).
    state_path: Path | None = None
    world: World = field(init=False)
    faults: FaultPlan = field(default_factory=FaultPlan)
    hooks: HookSender = field(init=False)
    traffic: list[Exchange] = field(default_factory=list)
    token_requests: dict[int, int] = field(default_factory=dict)
    # What the control API (/_sandbox/*) requires in X-Sandbox-Secret: new at each start.
    control_secret: str = field(default_factory=lambda: secrets.token_urlsafe(32))
    # App-manifest codes not yet exchanged, with when they expire (registration.py).
    # (manifest, expiry, the login of the user or organization the App is for)
    manifest_codes: dict[str, tuple[dict[str, Any], float, str]] = field(default_factory=dict)
    # Signs the sandbox's short-lived URLs (a job log behind its redirect, page forms).
    url_secret: bytes = field(default_factory=lambda: secrets.token_bytes(32))
    # The webhooks of Apps 2, 3… registered through the manifest flow (apps.py).
    other_hooks: AppHooks = field(default_factory=AppHooks)
    # The manifest whose permissions and events the first App has: Steelframe's `app.yml`
    # in a checkout (None, as in an installed wheel: AppInfo's own).
    manifest: Path | None = field(default_factory=lambda: project_manifest())

    def __post_init__(self) -> None:
        # The control API hands out file:// URIs of the bare repositories, which must be
        # absolute (dev's data dir is relative).
        self.root = self.root.resolve()
        now = self.clock()
        owner = User(1, "steelframe-dev", "Organization")
        bot = User(2, f"{self.app_slug}[bot]", "Bot")
        app = AppInfo(
            self.app_id, self.app_slug, "Steelframe (sandbox)", owner, bot, self.public_key_pem, now
        )
        if self.manifest is not None:
            # The first App asks what Steelframe's manifest asks: with more, the sandbox
            # would send (and allow) what GitHub would not for the real App.
            take_manifest(app, msgspec.yaml.decode(self.manifest.read_bytes()))
        loaded = load_world(self.state_path) if self.state_path is not None else None
        if loaded is not None and loaded.app.id == self.app_id:
            loaded.app.public_key_pem = self.public_key_pem  # dev makes a new key each run
            # A world from an older sandbox: the App's events and permissions as they are now.
            loaded.app.events = app.events
            loaded.app.permissions = dict(app.permissions)
            loaded.clock = self.clock
            self.world = loaded
        else:
            self.world = World(app=app, clock=self.clock)
            self.world.users[owner.login.lower()] = owner
            self.world.users[bot.login.lower()] = bot
        self.hooks = HookSender(app_id=self.app_id)

    def save(self) -> None:
        if self.state_path is not None:
            save_world(self.world, self.state_path)

    @property
    def shapes(self) -> Shapes:
        return Shapes(self.base_url)

    @property
    def ops(self) -> Operations:
        return Operations(self.world, self.shapes)

    def emit(self, events: list[HookEvent]) -> list[Delivery]:
        """To the first App's webhook, and to every other App installed on the event's
        repository (the deliveries returned are the first App's)."""
        self.other_hooks.fan_out(self.world, events)
        return self.hooks.enqueue(events)

    # -- seeding ---------------------------------------------------------------------------

    def install(
        self, account: str, *, account_type: str = "User", notify: bool = True
    ) -> Installation:
        """Install the App on an account (GitHub sends `installation.created`)."""
        user = self.world.user(account, kind=account_type)
        inst = Installation(self.world.next_id(), user, self.clock())
        self.world.installations[inst.id] = inst
        if notify:
            self.emit(
                [
                    HookEvent(
                        "installation",
                        {
                            "action": "created",
                            "installation": self.shapes.installation(self.world.app, inst),
                            "repositories": [],
                            "sender": self.shapes.user(user),
                        },
                    )
                ]
            )
        return inst

    def add_repo(
        self,
        full_name: str,
        *,
        installation: Installation | None = None,
        default_branch: str = "main",
        private: bool = False,
        with_git: bool = True,
        notify: bool = True,
    ) -> Repo:
        """A repository (with a bare git repo holding one commit) and, when `installation`
        is given, the App's access to it (`installation_repositories.added`)."""
        owner_login, _, name = full_name.partition("/")
        if not owner_login or not name:
            raise ValueError("repository must look like owner/name")
        existing = self.world.repo(full_name)
        if existing is not None:
            return existing
        owner = self.world.user(owner_login)
        repo = Repo(
            self.world.next_id(),
            owner,
            name,
            self.clock(),
            default_branch=default_branch,
            private=private,
        )
        if with_git:
            repo.git_path = self.root / owner_login / f"{name}.git"
            git.init_bare(
                repo.git_path,
                branch=default_branch,
                readme=f"# {full_name}\n\nA Steelframe sandbox repository.\n",
            )
        self.world.repos[full_name.lower()] = repo
        if installation is not None:
            self.grant_installation(installation, repo, notify=notify)
        return repo

    def uninstall(self, inst: Installation, *, notify: bool = True) -> None:
        """Remove the App's installation (GitHub sends `installation.deleted`, naming the
        repositories it served); its tokens stop working and its repositories have no
        installation any more (`GET /repos/{owner}/{repo}/installation` is 404)."""
        served = [r for r in self.world.repos.values() if r.installation_id == inst.id]
        shaped = self.shapes.installation(self.world.app, inst)
        for repo in served:
            repo.installation_id = None
        inst.repos.clear()
        self.world.installations.pop(inst.id, None)
        if notify:
            self.emit(
                [
                    HookEvent(
                        "installation",
                        {
                            "action": "deleted",
                            "installation": shaped,
                            "repositories": [self.shapes.repo_lite(r) for r in served],
                            "sender": self.shapes.user(inst.account),
                        },
                    )
                ]
            )

    def suspend(self, inst: Installation, *, suspended: bool = True) -> None:
        """Suspend the App's installation (or lift the suspension): while suspended it
        serves no repository (a token request is a 403; `GET /repos/{owner}/{repo}/installation`
        still answers it, with `suspended_at` set, as GitHub does) and GitHub sends
        `installation.suspend`; lifted, `installation.unsuspend`."""
        inst.suspended_at = self.clock() if suspended else None
        shaped = self.shapes.installation(self.world.app, inst)
        # The webhook schema's installation names its single-file access too.
        shaped.update(has_multiple_single_files=False, single_file_paths=[])
        if suspended:
            shaped["suspended_by"] = self.shapes.user(inst.account)
        served = [r for r in self.world.repos.values() if r.installation_id == inst.id]
        self.emit(
            [
                HookEvent(
                    "installation",
                    {
                        "action": "suspend" if suspended else "unsuspend",
                        "installation": shaped,
                        "repositories": [self.shapes.repo_lite(r) for r in served],
                        "sender": self.shapes.user(inst.account),
                    },
                )
            ]
        )

    def grant_installation(self, inst: Installation, repo: Repo, *, notify: bool = True) -> None:
        repo.installation_id = inst.id
        inst.repos.add(repo.full_name.lower())
        if notify:
            self.emit(
                [
                    HookEvent(
                        "installation_repositories",
                        {
                            "action": "added",
                            "installation": self.shapes.installation(self.world.app, inst),
                            "repository_selection": "selected",
                            "repositories_added": [self.shapes.repo_lite(repo)],
                            "repositories_removed": [],
                            "requester": None,
                            "sender": self.shapes.user(inst.account),
                        },
                    )
                ]
            )

    def grant(self, full_name: str, login: str, permission: str) -> None:
        repo = self.world.repo(full_name)
        if repo is None:
            raise KeyError(full_name)
        self.world.user(login)
        repo.collaborators[login.lower()] = permission

    def user_token(self, login: str) -> str:
        """A personal token acting as `login` (tests use it to play a human)."""
        return issue_user_token(self.world, login)

    def set_webhook(self, url: str | None, secret: str | None) -> None:
        """Where the App's webhooks go, signed with what (GitHub pings a new URL)."""
        self.hooks.configure(url, secret)
        if url:
            self.ping()

    def ping(self, app: AppInfo | None = None) -> list[Delivery]:
        """GitHub pings a webhook URL when it is set; so does the sandbox. `app`: one of
        Apps 2, 3…, pinged at its own URL (default: the first App)."""
        other = app is not None and app is not self.world.app
        sender = self.other_hooks.sender(app) if other and app else self.hooks
        app = app or self.world.app
        hook_url = f"{self.shapes.api}/app/hook/config"
        created = app.created_at
        return sender.enqueue(
            [
                HookEvent(
                    "ping",
                    {
                        "zen": ZEN,
                        "hook_id": sender.hook_id,
                        "hook": {
                            "type": "App",
                            "id": sender.hook_id,
                            "name": "web",
                            "active": True,
                            "app_id": app.id,
                            "events": list(app.events),
                            "config": {
                                "content_type": "json",
                                "url": sender.url or "",
                                "insecure_ssl": "0",
                            },
                            "updated_at": iso(created),
                            "created_at": iso(created),
                            "url": hook_url,
                            "test_url": f"{hook_url}/test",
                            "ping_url": f"{hook_url}/pings",
                            "deliveries_url": f"{hook_url}/deliveries",
                            "last_response": {"code": None, "status": "unused", "message": None},
                        },
                    },
                )
            ]
        )
