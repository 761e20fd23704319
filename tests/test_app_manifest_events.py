"""app.yml subscribes to every event Steelframe handles: GitHub delivers an App only the
events its registration names (besides `installation` and `installation_repositories`,
which it always sends, and the `ping` on creating the hook), so a handler for an event the
manifest leaves out never runs against a real App, however well the sandbox exercises it."""

from __future__ import annotations

from pathlib import Path

import yaml

from webhooks.router import build_router

ROOT = Path(__file__).resolve().parent.parent
ALWAYS_DELIVERED = {"installation", "installation_repositories", "ping"}


def test_every_handled_event_is_one_the_registered_app_receives() -> None:
    subscribed = set(yaml.safe_load((ROOT / "app.yml").read_text())["default_events"])
    router = build_router()
    # gidgethub's Router keeps its routes by event name: handlers for any delivery of an
    # event, and handlers for one value of a key (`action`).
    handled = set(router._shallow_routes) | set(router._deep_routes)
    assert {"issues", "pull_request", "check_run"} <= handled  # what the routes are
    assert sorted(handled - ALWAYS_DELIVERED - subscribed) == []


def test_push_reaches_the_app_so_chats_checkout_is_refreshed() -> None:
    """docs/configuration.md (STEELFRAME_CHECKOUT_REFRESH_SECONDS): Chat's clone is fetched
    "on every `push` webhook"; app.yml once did not subscribe to `push`."""
    app = yaml.safe_load((ROOT / "app.yml").read_text())
    assert "push" in app["default_events"]
    # A push event needs the contents permission, at least read.
    assert app["default_permissions"]["contents"] in ("read", "write")
