"""A worker container can mount the sandbox's /proc. Each coding run's bwrap makes a pid
namespace and mounts a fresh procfs in it (`--proc /proc`, bot/lifecycle/sandbox_mounts.py).
Docker and Kubernetes mask paths of the container's /proc (/proc/keys, /proc/timer_list...)
and make others read-only (/proc/sys...); with such mounts on /proc the kernel refuses a
user namespace a new procfs ("VFS: Mount too revealing"), and the image's non-root worker
needs a user namespace. So seccomp and AppArmor unconfined are not enough: every coding run
failed with "bwrap: Can't mount proc on /newroot/proc: Operation not permitted" until the
masks were lifted too (Docker: systempaths=unconfined; Kubernetes: procMount: Unmasked).

Reproduced here by hand, as root on a host whose /proc is unmasked: in a private mount
namespace, `mount --bind /dev/null /proc/keys`, then as uid 10001
`bwrap --unshare-user --unshare-pid --ro-bind / / --proc /proc true` exits 1 with that line
(and 0 without the bind)."""

from __future__ import annotations

import re
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parent.parent


def test_compose_workers_may_mount_the_sandboxs_proc() -> None:
    services = yaml.safe_load((ROOT / "compose.yaml").read_text())["services"]
    for name in ("worker-1", "worker-2"):
        options = set(services[name]["security_opt"])
        assert {"seccomp=unconfined", "apparmor=unconfined", "systempaths=unconfined"} <= options


def test_the_dockerfiles_worker_example_may_mount_the_sandboxs_proc() -> None:
    comments = " ".join(
        line.lstrip("#").strip().rstrip("\\")
        for line in (ROOT / "Dockerfile").read_text().splitlines()
        if line.startswith("#")
    )
    runs = re.findall(r"docker run (.*?) IMAGE steelframe worker", comments)
    assert runs
    for run in runs:
        assert "--security-opt systempaths=unconfined" in " ".join(run.split()), run


def test_the_kubernetes_worker_may_mount_the_sandboxs_proc() -> None:
    documents = yaml.safe_load_all((ROOT / "deploy/kubernetes/steelframe.yaml").read_text())
    [worker] = [d for d in documents if d["metadata"]["name"] == "steelframe-worker"]
    pod = worker["spec"]["template"]["spec"]
    [container] = pod["containers"]
    assert container["securityContext"]["procMount"] == "Unmasked"
    # Kubernetes allows an unmasked /proc only in a pod with a user namespace of its own.
    assert pod["hostUsers"] is False


def test_deploy_md_names_every_allowance_the_workers_need() -> None:
    text = (ROOT / "docs" / "deploy.md").read_text()
    part = text[text.index("- **Workers** need") :]
    part = part[: part.index("\n- **", 3)]
    for allowance in ("seccomp=unconfined", "apparmor=unconfined", "systempaths=unconfined"):
        assert allowance in part
    assert "procMount: Unmasked" in text and "hostUsers: false" in text
