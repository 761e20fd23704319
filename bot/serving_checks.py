"""Is this configuration complete for the role it plays? The settings a serving role needs
(webhook secret, App id and key pair), a coding runtime for workers, and the sandbox.

One source for three readers: `/readyz` (503 naming each missing setting), the start-up
warning of `serve` and `worker`, and `steelframe doctor`. Settings only, no I/O beyond
reading the key file: reachability (database, Redis, GitHub) is checked by their callers.
"""

from __future__ import annotations

import functools
import os
from collections.abc import Callable
from dataclasses import dataclass

from bot.config import Settings
from bot.config_values import ConfigError
from bot.lifecycle.run_cgroup import RunLimitsStatus


@dataclass(frozen=True)
class Check:
    """One finding: `ok` False makes /readyz 503 and doctor exit 1; `note` marks an ok
    finding worth a look (doctor prints it as a warning)."""

    name: str
    ok: bool
    detail: str
    note: bool = False


def github_app_check(settings: Settings) -> Check:
    """APP_ID and a readable, well-formed private key, together or not at all. None of
    them is a service without GitHub (Chat only): ready, and said so."""
    has_key = settings.private_key is not None or settings.private_key_path is not None
    if settings.app_id is None and not has_key:
        if settings.webhook_secret is not None:
            return Check(
                "github_app",
                False,
                "WEBHOOK_SECRET is set but APP_ID and PRIVATE_KEY_PATH (or PRIVATE_KEY) are "
                "not: set the App's id and key",
            )
        return Check(
            "github_app",
            True,
            "no GitHub App configured: webhooks and filing answer 503 (Chat only); "
            "`steelframe github register` makes one",
            note=True,
        )
    if settings.app_id is None:
        return Check("github_app", False, "APP_ID missing: the private key has no App to sign for")
    if not has_key:
        return Check(
            "github_app",
            False,
            f"APP_ID={settings.app_id} but no private key: set PRIVATE_KEY_PATH (or PRIVATE_KEY)",
        )
    try:
        key = settings.private_key_pem()
    except ConfigError as exc:
        return Check("github_app", False, str(exc))
    # Parsed as serve will parse it: any text between PEM markers passed here (doctor,
    # /readyz) and then stopped serve at start.
    from bot.github.app_auth import load_private_key, private_key_setting

    source = private_key_setting(settings)
    if key is None or "PRIVATE KEY-----" not in key.reveal():
        return Check("github_app", False, f"{source}: holds no PEM private key")
    try:
        load_private_key(key, setting=source)
    except ConfigError as exc:
        return Check("github_app", False, str(exc))
    return Check("github_app", True, f"App {settings.app_id} at {settings.github_api_url}")


def webhook_secret_check(settings: Settings) -> Check:
    if settings.webhook_secret is not None:
        return Check("webhook_secret", True, "set")
    if settings.github_configured:
        return Check(
            "webhook_secret",
            False,
            "WEBHOOK_SECRET missing: every webhook delivery is refused (503)",
        )
    return Check("webhook_secret", True, "not set (no GitHub App configured)", note=True)


def coding_runtime_check(settings: Settings) -> Check:
    """What a worker runs coding tasks with; a serving role never needs one itself."""
    agent = settings.coding_agent or ("command" if settings.coding_command else None)
    if agent is None:
        return Check(
            "coding_runtime",
            True,
            "no coding agent configured (STEELFRAME_CODING_AGENT): workers leave tasks "
            "waiting for info; `steelframe dev` uses its demo runtime",
            note=True,
        )
    model = f" · model {settings.coding_model}" if settings.coding_model else ""
    return Check("coding_runtime", True, f"{agent}{model}")


def serving_checks(settings: Settings) -> list[Check]:
    """What `serve` needs besides its database and Redis: each failing one is a 503 reason."""
    return [github_app_check(settings), webhook_secret_check(settings)]


# The sandbox checks: each takes the settings and returns its findings (bubblewrap, the
# egress filter, the setup cache, per-run limits); /readyz and doctor show them all. Some
# probe the host (blocking): async callers run them on a thread.
SandboxCheck = Callable[[Settings], list[Check]]


def _bubblewrap_check(settings: Settings) -> list[Check]:
    from bot.lifecycle.sandbox import status

    found = status(settings)
    detail = found.warning or f"coding runs in the {found.mode} sandbox"
    # Never unready for it (a serving role runs no code), but said where operators look.
    return [Check("coding_sandbox", True, detail, note=found.warning is not None)]


def _egress_check(settings: Settings) -> list[Check]:
    """Whether a coding run's network is closed but for its allowlist proxy on this host
    (a probe that starts a sandbox once per process: about half a second, then cached)."""
    from bot.lifecycle.egress import egress_problem
    from bot.lifecycle.sandbox import Network, probe_problem

    if settings.coding_sandbox == "off" or settings.coding_network == Network.OFF:
        return [Check("coding_egress", True, "not used: the coding run has no network")]
    sandbox_problem = probe_problem(settings)
    if sandbox_problem is not None:
        return [Check("coding_egress", True, "not checked: the sandbox cannot start", note=True)]
    problem = egress_problem()
    if problem is not None:
        # Workers refuse coding runs here (the run fails with this reason); a serving role
        # runs none, so it is said, not a 503.
        return [Check("coding_egress", True, f"coding runs refused: {problem}", note=True)]
    return [Check("coding_egress", True, "each run's network is closed but for its proxy")]


def _setup_cache_check(settings: Settings) -> list[Check]:
    """Whether repository setup can be cached here: its folder can be made and written."""
    import tempfile

    if settings.setup_cache_keep <= 0:
        return [Check("setup_cache", True, "off (STEELFRAME_SETUP_CACHE_KEEP=0)")]
    root = settings.data_dir / "setup-cache"
    try:
        root.mkdir(parents=True, exist_ok=True)
        with tempfile.NamedTemporaryFile(dir=root, prefix=".probe-"):
            pass
    except OSError as exc:
        detail = f"{root} is not writable ({exc.strerror or exc}): every run repeats its setup"
        return [Check("setup_cache", True, detail, note=True)]
    return [
        Check("setup_cache", True, f"{root}, newest {settings.setup_cache_keep} per repository")
    ]


@functools.lru_cache(maxsize=1)
def _run_limits_status() -> RunLimitsStatus:
    """Made once per process (a group made and removed): the host does not change, and
    /readyz is probed every few seconds."""
    from bot.lifecycle import run_cgroup

    return run_cgroup.status()


def _run_limits_check(settings: Settings) -> list[Check]:
    """Whether a run's memory and process limits hold for the whole run (a cgroup per run)
    or only per process (found out once per process)."""
    if settings.coding_sandbox == "off":
        return [Check("run_limits", True, "per process only: the sandbox is off", note=True)]
    found = _run_limits_status()
    return [Check("run_limits", True, found.detail, note=not found.per_run)]


def _run_uids_check(settings: Settings) -> list[Check]:
    """Who a sandboxed run is on the host (docs/lifecycle.md, "Who it runs as"): as root, a
    uid of its own from STEELFRAME_SANDBOX_UID_RANGE, or nobody when the range is off or
    unusable here; otherwise the worker's uid in a user namespace. Found afresh each time (a
    read of /proc/self/uid_map, the lock folder made): a folder fixed is seen at once."""
    from bot.lifecycle import sandbox_uid

    if settings.coding_sandbox == "off":
        return [Check("sandbox_uids", True, "not used: the sandbox is off")]
    if os.geteuid() != 0:
        detail = (
            "each run is the worker's uid in a user namespace of its own (the worker is not "
            "root: STEELFRAME_SANDBOX_UID_RANGE does not apply)"
        )
        return [Check("sandbox_uids", True, detail)]
    uids = settings.sandbox_uid_range
    found = sandbox_uid.range_status(uids)
    if uids is None or found.problem is not None:
        detail = f"every run is nobody ({sandbox_uid.NOBODY}), shared: {found.problem}"
        return [Check("sandbox_uids", True, detail, note=True)]
    here = f", {len(found.usable)} of them exist here" if len(found.usable) < len(uids) else ""
    detail = (
        f"each run a uid of its own from STEELFRAME_SANDBOX_UID_RANGE={uids} ({len(uids)} "
        f"uids{here}; runs beyond that many at once are nobody)"
    )
    return [Check("sandbox_uids", True, detail)]


SANDBOX_CHECKS: list[SandboxCheck] = [
    _bubblewrap_check,
    _egress_check,
    _setup_cache_check,
    _run_limits_check,
    _run_uids_check,
]


def sandbox_checks(settings: Settings) -> list[Check]:
    """Every registered sandbox check's findings, in order."""
    return [check for probe in SANDBOX_CHECKS for check in probe(settings)]
