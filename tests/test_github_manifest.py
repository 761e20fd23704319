"""app.yml: the GitHub App manifest asks for what Steelframe uses, and no more."""

from __future__ import annotations

from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]


def manifest() -> dict[str, Any]:
    """The manifest's top-level keys: scalars, lists and one-level maps (all it uses)."""
    parsed: dict[str, Any] = {}
    key = ""
    for raw in (ROOT / "app.yml").read_text().splitlines():
        line = raw.split(" #")[0].rstrip()
        if not line or line.lstrip().startswith("#"):
            continue
        if not raw.startswith(" "):
            key, _, value = line.partition(":")
            parsed[key] = value.strip() or None
        elif line.strip().startswith("- "):
            items = parsed[key] if isinstance(parsed[key], list) else []
            parsed[key] = [*items, line.strip()[2:]]
        elif ":" in line:
            name, _, value = line.strip().partition(":")
            section = parsed[key] if isinstance(parsed[key], dict) else {}
            parsed[key] = {**section, name: value.strip()}
    return parsed


def test_manifest_names_the_webhook_path_events_and_permissions() -> None:
    app = manifest()
    assert app["name"] == "Steelframe"
    hook = app["hook_attributes"]
    assert isinstance(hook, dict) and hook["url"].endswith("/api/github/webhooks")
    assert app["default_events"] == [
        "issues",
        "issue_comment",
        "pull_request",
        "pull_request_review",
        "pull_request_review_comment",
        "push",
        *("check_run", "check_suite", "status", "workflow_run", "workflow_job"),
    ]
    assert app["default_permissions"] == {
        "issues": "write",
        "pull_requests": "write",
        "contents": "write",
        "metadata": "read",
        **{"checks": "read", "statuses": "read", "actions": "read"},
    }


def test_every_event_the_manifest_asks_for_has_a_handler() -> None:
    """No more than the code uses: an event nobody handles is not subscribed to."""
    from gidgethub.sansio import Event

    from webhooks.router import build_router

    router = build_router()
    for name in manifest()["default_events"]:
        action = None if name == "status" else "completed"
        if name.startswith(("issue", "pull_request")):
            action = {"issues": "opened", "issue_comment": "created"}.get(name, "closed")
            if name.startswith("pull_request_review"):
                action = "submitted" if name == "pull_request_review" else "created"
        data = {} if action is None else {"action": action}
        assert router.fetch(Event(data, event=name, delivery_id="-")), name


def test_the_ci_reads_need_only_what_the_manifest_grants() -> None:
    from bot.github.permissions import needed_permissions

    granted = manifest()["default_permissions"]
    for path in (
        "/commits/abc/check-runs",
        "/check-runs/1/annotations",
        "/commits/abc/status",
        "/actions/jobs/1/logs",
        "/actions/runs/1/jobs",
        "/pulls/1/files",
    ):
        ((name, level),) = needed_permissions("GET", path).items()
        assert granted.get(name) in (level, "write"), path
