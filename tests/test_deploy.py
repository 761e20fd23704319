"""compose.yaml and the Kubernetes manifests describe the deployment docs/deploy.md walks
through; `docker compose config` validates the file where a Compose is installed."""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any

import yaml

from tests.fakes.tools import require_tool

ROOT = Path(__file__).resolve().parent.parent


def _compose() -> dict[str, Any]:
    loaded = yaml.safe_load((ROOT / "compose.yaml").read_text())
    assert isinstance(loaded, dict)
    return loaded


def test_compose_runs_two_serve_instances_behind_a_proxy_and_two_workers() -> None:
    services = _compose()["services"]
    assert set(services) == {
        "postgres",
        "redis",
        "serve-1",
        "serve-2",
        "worker-1",
        "worker-2",
        "proxy",
    }
    for name in ("serve-1", "serve-2"):
        serve = services[name]
        assert serve["command"][:2] == ["steelframe", "serve"]
        assert "/readyz" in " ".join(serve["healthcheck"]["test"])
        env = serve["environment"]
        assert env["STEELFRAME_DATABASE_URL"].startswith("postgresql+psycopg://")
        assert env["STEELFRAME_REDIS_URL"].startswith("redis://")
        assert serve["depends_on"]["postgres"]["condition"] == "service_healthy"
    for name in ("worker-1", "worker-2"):
        worker = services[name]
        assert worker["command"] == ["steelframe", "worker"]
        assert {"seccomp=unconfined", "apparmor=unconfined"} <= set(worker["security_opt"])
    assert services["proxy"]["depends_on"]["serve-1"]["condition"] == "service_healthy"
    for name in ("postgres", "redis"):
        assert services[name]["healthcheck"]["test"]


def test_the_proxy_spreads_over_both_instances_without_buffering_streams() -> None:
    conf = (ROOT / "deploy/nginx.conf").read_text()
    assert "server serve-1:8080" in conf and "server serve-2:8080" in conf
    assert "proxy_buffering off" in conf and "client_max_body_size 26m" in conf
    # Webhooks on connections of their own: HTTP/1.1, kept alive, on serve's fast lane.
    webhooks = conf[conf.index("location = /api/github/webhooks") :]
    webhooks = webhooks[: webhooks.index("}")]
    assert "proxy_pass http://steelframe_webhooks;" in webhooks
    assert "proxy_http_version 1.1;" in webhooks
    assert "upstream steelframe_webhooks {" in conf


def test_the_env_example_names_only_settings_steelframe_knows() -> None:
    from bot.config import Settings

    names = {
        line.split("=", 1)[0].lstrip("# ").strip()
        for line in (ROOT / "deploy/steelframe.env.example").read_text().splitlines()
        if "=" in line
    }
    Settings.from_env(
        dict.fromkeys(names - {"APP_ID", "PRIVATE_KEY"}, "x")
        | {
            "STEELFRAME_REPO": "owner/name",
            "STEELFRAME_RUNTIME": "offline",
            "OPENAI_BASE_URL": "http://127.0.0.1",
            "STEELFRAME_PUBLIC_URL": "https://steelframe.example.com",
        }
    )  # an unknown STEELFRAME_* name would raise


def test_kubernetes_manifests_have_probes_and_the_workers_sandbox_allowance() -> None:
    documents = list(yaml.safe_load_all((ROOT / "deploy/kubernetes/steelframe.yaml").read_text()))
    by_name = {(d["kind"], d["metadata"]["name"]): d for d in documents}
    serve = by_name[("Deployment", "steelframe-serve")]["spec"]["template"]["spec"]
    [container] = serve["containers"]
    assert container["readinessProbe"]["httpGet"]["path"] == "/readyz"
    assert container["livenessProbe"]["httpGet"]["path"] == "/healthz"
    worker = by_name[("Deployment", "steelframe-worker")]["spec"]["template"]["spec"]
    assert worker["containers"][0]["securityContext"]["seccompProfile"]["type"] == "Unconfined"
    assert ("Service", "steelframe") in by_name and ("Secret", "steelframe") in by_name


def test_docker_compose_config_accepts_the_file(tmp_path: Path) -> None:
    compose = require_tool("docker-compose", "docker-compose")
    env_file = ROOT / "deploy/steelframe.env"
    created = not env_file.exists()
    if created:
        env_file.write_text((ROOT / "deploy/steelframe.env.example").read_text())
    try:
        result = subprocess.run(
            [compose, "-f", str(ROOT / "compose.yaml"), "config", "--quiet"],
            capture_output=True,
            text=True,
            timeout=60,
        )
    finally:
        if created:
            env_file.unlink()
    assert result.returncode == 0, result.stderr
