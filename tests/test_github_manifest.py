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
    ]
    assert app["default_permissions"] == {
        "issues": "write",
        "pull_requests": "write",
        "contents": "write",
        "metadata": "read",
    }
