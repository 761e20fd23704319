"""`steelframe doctor`: is the whole configuration good to run on? The database, Redis, the
GitHub App (its credentials tried against GitHub), the webhook secret, the sandbox checks,
the coding agent, the model, and secrets that git would commit.

Each line is `ok`, `warn` (works, but look) or `FAIL`; the exit status is 1 when any
fails. A shell with nothing configured is a working `steelframe dev` (it brings its own
Redis, sandbox and demo runtime): warnings, exit 0.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from bot.config import Settings
from bot.config_values import ConfigError
from bot.lifecycle.agents.installed import configured_problem, find_all
from bot.redis_auth import require_authenticated_redis
from bot.serving_checks import (
    Check,
    coding_runtime_check,
    github_app_check,
    sandbox_checks,
    webhook_secret_check,
)
from steelframe.cli import load_settings, migration_state, unknown_migrations_problem
from steelframe.secrets_in_git import tracked_secrets

GITHUB_SECONDS = 10.0


def register(subparsers: Any) -> None:
    doctor = subparsers.add_parser("doctor")
    doctor.add_argument(
        "--offline", action="store_true", help="do not try the App's credentials against GitHub"
    )
    doctor.set_defaults(handler=cmd_doctor)


def cmd_doctor(args: argparse.Namespace) -> int:
    try:
        settings = load_settings()
    except ConfigError as exc:
        _show(Check("configuration", False, str(exc)))
        return 1
    failed = False
    for probe in probes(offline=args.offline):
        for check in probe(settings):
            _show(check)
            failed = failed or not check.ok
    print("FAIL: fix the lines marked FAIL" if failed else "ok")
    return 1 if failed else 0


def probes(*, offline: bool) -> list[Callable[[Settings], list[Check]]]:
    """Every check doctor runs, in the order it prints them."""
    github = (lambda s: [github_app_check(s)]) if offline else _github_checks
    return [
        _database_checks,
        _redis_checks,
        github,
        lambda s: [webhook_secret_check(s)],
        sandbox_checks,
        _coding_checks,
        _model_checks,
        _secrets_checks,
    ]


def _show(check: Check) -> None:
    mark = "FAIL" if not check.ok else "warn" if check.note else "ok"
    print(f"{mark:<4}  {check.name:<15} {check.detail}", file=sys.stdout)


def _database_checks(settings: Settings) -> list[Check]:
    from sqlalchemy.engine import make_url

    from bot import db as dbmod

    shown = make_url(settings.database_url).render_as_string(hide_password=True)
    try:
        database = dbmod.Database.from_url(settings.database_url)
    except Exception as exc:  # a folder that cannot be made, a driver missing...
        return [Check("database", False, f"{shown}: {exc}")]
    try:
        state = migration_state(database.engine)
    except Exception as exc:  # refused, unreachable, no such database, bad password...
        # The server's own reason (the driver's first line: never the password), as serve
        # gives it: "unreachable" alone sent people to check a server that had answered.
        reason = str(getattr(exc, "orig", None) or exc).strip().splitlines() or [repr(exc)]
        return [Check("database", False, f"{shown}: {reason[0]} (STEELFRAME_DATABASE_URL)")]
    finally:
        database.dispose()
    if state.unknown:  # serve, worker and `db upgrade` stop at start on it
        return [Check("database", False, f"{shown} {unknown_migrations_problem(state.unknown)}")]
    if not state.up_to_date:
        where = f"at {', '.join(state.applied)}" if state.applied else "no migration applied"
        note = f"{shown}: {where}; serve and dev migrate on start (or `steelframe db upgrade`)"
        return [Check("database", True, note, note=True)]
    return [Check("database", True, f"{shown} (migrations up to date)")]


def _redis_checks(settings: Settings) -> list[Check]:
    if not settings.redis_url:
        detail = "not configured: `steelframe dev` starts its own; serve and workers need one"
        return [Check("redis", True, detail, note=True)]
    try:
        require_authenticated_redis(settings)
    except ConfigError as exc:  # serve and worker stop at start with this very line
        return [Check("redis", False, str(exc))]
    import redis

    client = redis.Redis.from_url(settings.redis_url, socket_timeout=5, socket_connect_timeout=5)
    try:
        client.ping()
    except redis.RedisError as exc:
        return [Check("redis", False, f"unreachable: {exc} (STEELFRAME_REDIS_URL)")]
    finally:
        client.close()
    return [Check("redis", True, "reachable")]


def _github_checks(settings: Settings) -> list[Check]:
    """The App's settings, then its credentials tried against GitHub (`GET /app`)."""
    found = github_app_check(settings)
    if not found.ok or not settings.github_configured:
        return [found]
    import aiohttp

    from bot.errors import SteelframeError
    from bot.github.client import GitHubClient
    from bot.github.errors import GitHubUnavailable
    from bot.github.retry import RetryPolicy

    async def identify() -> str:
        client = GitHubClient.from_settings(
            settings, retry=RetryPolicy(max_attempts=2, base_delay=0.5)
        )
        try:
            identity = await asyncio.wait_for(client.identity(), GITHUB_SECONDS)
            return f"{identity.slug} (id {identity.id}) at {settings.github_api_url}"
        finally:
            await client.close()

    try:
        return [Check("github_app", True, asyncio.run(identify()))]
    except ConfigError as exc:  # a key the signer cannot load (PEM markers around no key)
        return [Check("github_app", False, str(exc))]
    except GitHubUnavailable as exc:
        return [Check("github_app", False, f"no answer from {settings.github_api_url}: {exc}")]
    except SteelframeError as exc:
        return [Check("github_app", False, f"{settings.github_api_url}: {exc.message}")]
    except (aiohttp.ClientError, OSError, TimeoutError) as exc:
        return [Check("github_app", False, f"{settings.github_api_url} unreachable: {exc}")]


def _coding_checks(settings: Settings) -> list[Check]:
    agent = settings.coding_agent or ("command" if settings.coding_command else None)
    found = find_all()
    checks = [coding_runtime_check(settings)]
    for item in found:
        where = f" at {item.path}" if item.path else ""
        name, label = item.preset.agent.value, item.preset.label
        line = f"{name:<7} {label:<12} {item.version or '-':<10} {item.verdict()}{where}"
        checks.append(Check("  agent", True, line))
    problem = configured_problem(agent, found) if agent is not None else None
    if problem:
        checks.append(Check("coding_agent", False, problem))
    return checks


def _model_checks(settings: Settings) -> list[Check]:
    from bot.runtimes.registry import check_runtime_settings

    try:
        check_runtime_settings(settings)
    except ConfigError as exc:
        return [Check("model", False, str(exc))]
    if settings.runtime == "offline":
        detail = "offline runtime: Chat answers from what it retrieved (STEELFRAME_RUNTIME)"
        return [Check("model", True, detail, note=True)]
    model = f" · {settings.model}" if settings.model else ""
    return [Check("model", True, f"{settings.runtime}{model}")]


def _secrets_checks(settings: Settings) -> list[Check]:
    extra = [settings.private_key_path] if settings.private_key_path else []
    tracked = tracked_secrets(Path.cwd(), extra)
    if tracked:
        return [
            Check(
                "secrets",
                True,
                f"git tracks {', '.join(tracked)}: `git rm --cached` them, rotate the secrets "
                "and keep them in .gitignore",
                note=True,
            )
        ]
    return [Check("secrets", True, "no .env or private key tracked by git here")]
