"""The sandbox's first App (the one tests install) asks what Steelframe's manifest asks: it
had `checks: write` where app.yml asks `read`, so the sandbox sent and allowed what GitHub
would not for the real App."""

from __future__ import annotations

from pathlib import Path

import msgspec

from github_sandbox import Sandbox

APP_YML = Path(__file__).resolve().parents[1] / "app.yml"


def test_the_default_app_has_the_manifests_permissions_and_events(tmp_path: Path) -> None:
    manifest = msgspec.yaml.decode(APP_YML.read_bytes())
    app = Sandbox(app_id=1, public_key_pem="unused", root=tmp_path).world.app
    assert app.permissions == manifest["default_permissions"]
    assert list(app.events) == manifest["default_events"]
