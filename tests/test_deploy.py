"""compose.yaml and the Kubernetes manifests describe the deployment docs/deploy.md walks
through; `docker compose config` validates the file where a Compose is installed."""

from __future__ import annotations

import re
import subprocess
import time
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest
import redis
import yaml

from bot.redis_auth import unauthenticated_remote_host
from tests.fakes.patience import PATIENCE_SECONDS
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
        assert serve["env_file"] == "deploy/steelframe.env"
        assert serve["depends_on"]["postgres"]["condition"] == "service_healthy"
    for name in ("worker-1", "worker-2"):
        worker = services[name]
        assert worker["command"] == ["steelframe", "worker"]
        assert {"seccomp=unconfined", "apparmor=unconfined"} <= set(worker["security_opt"])
    assert services["proxy"]["depends_on"]["serve-1"]["condition"] == "service_healthy"
    for name in ("postgres", "redis"):
        assert services[name]["healthcheck"]["test"]


def test_a_worker_started_from_the_image_turns_off_serves_healthcheck() -> None:
    """The image's HEALTHCHECK asks :8080/readyz, where only `serve` listens: a worker
    container that keeps it is marked unhealthy for ever (compose disables it; the
    Dockerfile's `docker run` example must too)."""
    for name in ("worker-1", "worker-2"):
        assert _compose()["services"][name]["healthcheck"] == {"disable": True}
    comments = " ".join(
        line.lstrip("#").strip().rstrip("\\")
        for line in (ROOT / "Dockerfile").read_text().splitlines()
        if line.startswith("#")
    )
    runs = re.findall(r"docker run (.*?) IMAGE steelframe worker", comments)
    assert runs and all("--no-healthcheck" in run.split() for run in runs), runs


def _env_file(name: str) -> dict[str, str]:
    lines = (ROOT / "deploy" / name).read_text().splitlines()
    return dict(line.split("=", 1) for line in lines if line and not line.startswith("#"))


def _assert_authenticated(database_url: str, redis_url: str) -> None:
    assert urlsplit(database_url).password, database_url
    assert urlsplit(redis_url).username and urlsplit(redis_url).password, redis_url
    assert unauthenticated_remote_host(redis_url) is None


def test_compose_runs_postgres_and_redis_with_passwords_from_an_env_file() -> None:
    services = _compose()["services"]
    datastores = _env_file("datastores.env.example")
    steelframe = _env_file("steelframe.env.example")
    postgres = services["postgres"]
    assert postgres["env_file"] == "deploy/datastores.env"
    assert "POSTGRES_PASSWORD" not in postgres["environment"]  # no literal in the file
    assert postgres["environment"]["POSTGRES_HOST_AUTH_METHOD"] == "scram-sha-256"
    redis_service = services["redis"]
    assert redis_service["env_file"] == "deploy/datastores.env"
    script = redis_service["command"][-1]
    assert "user default off" in script and "--aclfile" in script
    assert "$$REDIS_PASSWORD" in script and "requirepass" not in script
    assert "--user steelframe" in redis_service["healthcheck"]["test"][-1]
    assert datastores["POSTGRES_PASSWORD"].startswith("CHANGE-ME")
    assert datastores["REDIS_PASSWORD"].startswith("CHANGE-ME")
    # Steelframe's URLs come from its env file only, each carrying the matching password.
    for name in ("serve-1", "serve-2", "worker-1", "worker-2"):
        env = services[name]["environment"]
        assert "STEELFRAME_DATABASE_URL" not in env and "STEELFRAME_REDIS_URL" not in env
    database_url = steelframe["STEELFRAME_DATABASE_URL"]
    redis_url = steelframe["STEELFRAME_REDIS_URL"]
    _assert_authenticated(database_url, redis_url)
    assert urlsplit(database_url).password == datastores["POSTGRES_PASSWORD"]
    assert urlsplit(redis_url).password == datastores["REDIS_PASSWORD"]


def test_compose_redis_acl_refuses_clients_without_the_password(tmp_path: Path) -> None:
    """The ACL file compose's Redis writes, loaded by a real redis-server: no password, no
    answer; the example URL's user and password, PONG."""
    server = require_tool("redis-server", "redis-server")
    script = _compose()["services"]["redis"]["command"][-1].replace("$$", "$")
    acl = tmp_path / "users.acl"
    match = re.search(r"(printf .*?) > /tmp/users.acl", script, re.S)
    assert match is not None
    password = _env_file("datastores.env.example")["REDIS_PASSWORD"]
    subprocess.run(
        ["sh", "-c", f"{match.group(1)} > {acl}"], env={"REDIS_PASSWORD": password}, check=True
    )
    # On a socket file of its own, not a TCP port: redis-server cannot bind port 0 and say
    # which it took, and a port probed free can be taken by another test's Redis meanwhile.
    unix = str(tmp_path / "redis.sock")
    args = ["--port", "0", "--unixsocket", unix, "--save", "", "--appendonly", "no"]
    process = subprocess.Popen([server, *args, "--aclfile", str(acl)], stdout=subprocess.DEVNULL)
    try:
        url = urlsplit(_env_file("steelframe.env.example")["STEELFRAME_REDIS_URL"])
        credentials = url.netloc.rpartition("@")[0]
        client = redis.Redis.from_url(f"unix://{credentials}@{unix}")
        assert _ready(client)
        with pytest.raises(redis.AuthenticationError):
            redis.Redis(unix_socket_path=unix).ping()
    finally:
        process.terminate()
        process.wait(PATIENCE_SECONDS)


def _ready(client: redis.Redis) -> bool:
    deadline = time.monotonic() + PATIENCE_SECONDS
    while True:
        try:
            return bool(client.ping())
        except redis.ConnectionError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.05)


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
            "STEELFRAME_DATABASE_URL": _env_file("steelframe.env.example")[
                "STEELFRAME_DATABASE_URL"
            ],
            "STEELFRAME_REDIS_URL": _env_file("steelframe.env.example")["STEELFRAME_REDIS_URL"],
        }
    )  # an unknown STEELFRAME_* name would raise


def test_the_env_example_says_how_the_registered_key_gets_into_the_containers() -> None:
    """`github register` writes PRIVATE_KEY_PATH, a file on the operator's machine; the
    example once said it "writes these three" beside PRIVATE_KEY=, so a copied path left
    every container without its key (/readyz 503, "cannot read the key file")."""
    text = (ROOT / "deploy/steelframe.env.example").read_text()
    comment = text[: text.index("\nPRIVATE_KEY=")].rsplit("\n\n", 1)[-1]
    assert "writes these three" not in comment
    assert "PRIVATE_KEY_PATH" in comment and "base64 -w0" in comment


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
    secret = by_name[("Secret", "steelframe")]["stringData"]
    _assert_authenticated(secret["STEELFRAME_DATABASE_URL"], secret["STEELFRAME_REDIS_URL"])
    # /metrics answers 401 without the bearer token, which the scrape annotations cannot
    # carry: the manifest says so where it annotates, or the targets just show as down.
    text = (ROOT / "deploy/kubernetes/steelframe.yaml").read_text()
    serve_part = text[text.index("name: steelframe-serve") : text.index("containers:")]
    said = " ".join(line.strip("# ") for line in serve_part.splitlines() if "#" in line)
    assert "STEELFRAME_METRICS_TOKEN" in said and "authorization" in said, said


def test_docker_compose_config_accepts_the_file(tmp_path: Path) -> None:
    compose = require_tool("docker-compose", "docker-compose")
    env_files = [ROOT / "deploy/steelframe.env", ROOT / "deploy/datastores.env"]
    created = [path for path in env_files if not path.exists()]
    for path in created:
        path.write_text(path.with_name(path.name + ".example").read_text())
    try:
        result = subprocess.run(
            [compose, "-f", str(ROOT / "compose.yaml"), "config", "--quiet"],
            capture_output=True,
            text=True,
            timeout=60,
        )
    finally:
        for path in created:
            path.unlink()
    assert result.returncode == 0, result.stderr
