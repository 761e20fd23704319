"""A `serve` that finds its memory index built with another analysis or from another
database rebuilds it before it listens; every health check on serve gives that rebuild the
time docs/memory.md measured before a failure counts (compose's `start_period`, the image's
`--start-period`, a Kubernetes `startupProbe`). And the workers' AppArmor allowance is the
`securityContext` field of Kubernetes 1.30+, not the deprecated annotation."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parent.parent
UNITS = {"h": 3600, "m": 60, "s": 1}


def _seconds(duration: str) -> int:
    """A compose or Docker duration ("10m", "1m30s", "300s") in seconds."""
    parts = re.findall(r"(\d+)([hms])", duration)
    assert parts and "".join(n + u for n, u in parts) == duration, duration
    return sum(int(n) * UNITS[u] for n, u in parts)


def _documented_rebuild_seconds() -> int:
    """The longest build of a million chunks docs/memory.md reports ("Speed")."""
    rows = re.findall(r"^\| 1M[^|]*\| (\d+) s \|", (ROOT / "docs/memory.md").read_text(), re.M)
    assert rows, "docs/memory.md has no build time at 1M chunks"
    return max(map(int, rows))


def _kubernetes() -> dict[tuple[str, str], Any]:
    text = (ROOT / "deploy/kubernetes/steelframe.yaml").read_text()
    return {(d["kind"], d["metadata"]["name"]): d for d in yaml.safe_load_all(text)}


def test_serve_health_checks_wait_out_a_documented_index_rebuild() -> None:
    rebuild = _documented_rebuild_seconds()
    services = yaml.safe_load((ROOT / "compose.yaml").read_text())["services"]
    for name in ("serve-1", "serve-2"):
        check = services[name]["healthcheck"]
        assert _seconds(check.get("start_period", "0s")) >= rebuild, (name, check)
    dockerfile = (ROOT / "Dockerfile").read_text()
    [image] = re.findall(r"^HEALTHCHECK (.*)$", dockerfile, re.M)
    period = re.search(r"--start-period=(\S+)", image)
    assert period and _seconds(period.group(1)) >= rebuild, image


def test_kubernetes_gives_serve_a_startup_probe_before_liveness_counts() -> None:
    pod = _kubernetes()[("Deployment", "steelframe-serve")]["spec"]["template"]["spec"]
    [container] = pod["containers"]
    startup = container["startupProbe"]
    assert startup["httpGet"] == container["livenessProbe"]["httpGet"]
    allowed = startup.get("periodSeconds", 10) * startup.get("failureThreshold", 3)
    assert allowed >= _documented_rebuild_seconds(), startup


def test_the_kubernetes_worker_is_unconfined_by_the_apparmor_field() -> None:
    pod = _kubernetes()[("Deployment", "steelframe-worker")]["spec"]["template"]
    [container] = pod["spec"]["containers"]
    assert container["securityContext"]["appArmorProfile"] == {"type": "Unconfined"}
    annotations = pod["metadata"].get("annotations") or {}
    assert not [key for key in annotations if key.startswith("container.apparmor.")], annotations
