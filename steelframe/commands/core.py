"""The work of serve, db and operator (their options: core_options.py)."""

from __future__ import annotations

import argparse
import asyncio
import functools
import socket
import sys
from collections.abc import Callable

from sqlalchemy.orm import Session

from bot import db as dbmod
from bot.errors import Conflict, SteelframeError
from bot.operators import create_operator, list_operators, revoke_token, rotate_token
from bot.redis_auth import require_authenticated_redis
from bot.serving_checks import Check, serving_checks
from bot.stop_request import StopRequest
from steelframe.cli import load_settings, migration_state, require_data_dir, with_database
from steelframe.collector import start_serving
from steelframe.commands.memory import upgrade_memory_index
from steelframe.commands.narration import NarratedLines, Narrator
from steelframe.event_loop import LoopUnavailable, loop_factory
from steelframe.listening import say_listening
from steelframe.logs import access_logger, configure_logging
from steelframe.processes import run_processes
from steelframe.serving import serve_until_stopped
from steelframe.webhook_relay import relay_context


def cmd_serve(args: argparse.Namespace) -> int:
    # From here on a stop signal lets start-up finish its step (a migration, the memory
    # index) and the service stop without listening, instead of killing it halfway: a
    # `--processes` child is signalled whenever its group stops, start-up or not. Never
    # restored: once the loop has closed, the signals are held again until the process ends.
    return _serve(args, StopRequest().install())


def _serve(args: argparse.Namespace, stop_request: StopRequest) -> int:
    start_serving()  # migrations and the app's construction make no garbage worth a full walk
    settings = load_settings()
    require_authenticated_redis(settings)  # before anything is opened (create_app checks again)
    configure_logging(settings)
    narrator = Narrator.for_command(settings, logger="steelframe.serve", prefix="steelframe")
    warn_unready(serving_checks(settings), narrator)
    host = args.host or settings.host
    port = settings.port if args.port is None else args.port
    if args.processes < 1:
        print("steelframe: --processes must be at least 1", file=sys.stderr)
        return 2
    try:
        factory = loop_factory(args.loop)
    except LoopUnavailable as exc:
        print(f"steelframe: {exc}", file=sys.stderr)
        return 2
    if not args.reuse_port:
        claim_port(host, port)  # a taken port fails now, not after the start-up work
    require_data_dir(settings)
    # Imported once the port is known free: the app pulls in every shell and the memory
    # analysis (seconds on a busy machine), which a taken port need not wait for.
    from steelframe.server import create_app

    # An index of an older analysis is rebuilt once, here, before any process serves
    # (a --processes child finds it current: a manifest read).
    upgrade_memory_index(settings, NarratedLines(narrator) if narrator.as_records else sys.stdout)
    if args.processes > 1:
        group = narrator.with_prefix("serve")
        return run_processes(
            args,
            settings,
            host,
            port,
            as_records=group.as_records,
            say=group.say,
            tell=group.error,
            stop_request=stop_request,
        )
    app = create_app(settings)
    if settings.webhook_proxy_url and not args.no_relay:
        if port == 0:
            print("steelframe: WEBHOOK_PROXY_URL needs a fixed port (PORT)", file=sys.stderr)
            return 2
        app.cleanup_ctx.append(relay_context(settings, host, port))
        narrator.say(f"webhooks: through the relay {settings.webhook_proxy_url}")
    with asyncio.Runner(loop_factory=factory) as runner:
        runner.run(
            serve_until_stopped(
                app,
                host=host,
                port=port,
                reuse_port=args.reuse_port,
                access_log=access_logger(settings),
                # A child of --processes (--reuse-port): the parent said where.
                announce=None if args.reuse_port else announcer(narrator),
                stop_request=stop_request,
            )
        )
    if stop_request.requested:  # before the loop took the signals over
        narrator.say(f"steelframe serve: {stop_request.signal_name} while starting; stopped")
    stop_request.install()  # closing the loop put Python's default handlers back
    return 0


def announcer(narrator: Narrator) -> Callable[[str], None]:
    """Says serve's URL once it listens: a `url:` line, or a JSON record in JSON mode."""
    return functools.partial(say_listening, as_record=narrator.as_records)


def claim_port(host: str, port: int) -> None:
    """Raise the OSError a bind would (port taken...) before any start-up work; the caller's
    one-line message (cli.main) names the port. Port 0 is always free."""
    if port == 0:
        return
    found = socket.getaddrinfo(host or None, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
    for family, *_, address in found[:1]:  # the first address, as a bind tries it first
        with socket.create_server(address[:2], family=family):  # SO_REUSEADDR, as serving does
            pass


def warn_unready(checks: list[Check], narrator: Narrator) -> None:
    """One start-up warning per missing setting, the reason /readyz gives (it answers 503)."""
    for check in checks:
        if not check.ok:
            narrator.warn(f"not ready: {check.detail}")


def cmd_db_upgrade(args: argparse.Namespace) -> int:
    settings = load_settings()
    database = dbmod.Database.from_url(settings.database_url)
    print("applying migrations ...", flush=True)
    dbmod.upgrade(database.engine)
    print("database is up to date")
    database.dispose()
    return 0


def cmd_db_current(args: argparse.Namespace) -> int:
    database = dbmod.Database.from_url(load_settings().database_url)
    try:
        state = migration_state(database.engine)
    finally:
        database.dispose()
    applied, latest = ", ".join(state.applied), state.latest
    if not state.applied:
        print(f"no migration applied yet; run `steelframe db upgrade` (latest: {latest})")
        return 1
    if state.unknown:  # not "behind": upgrading cannot reach a migration it has no script for
        print(
            f"{applied} (not a migration this version knows: a newer Steelframe migrated "
            f"this database; this version knows up to {latest})"
        )
        return 1
    print(f"{applied} ({'up to date' if state.up_to_date else f'behind; latest is {latest}'})")
    return 0


def cmd_db_history(args: argparse.Namespace) -> int:
    database = dbmod.Database.from_url(load_settings().database_url)
    try:
        applied = set(dbmod.current_revisions(database.engine))
    finally:
        database.dispose()
    for revision, description in dbmod.migration_history():
        mark = "*" if revision in applied else " "
        # One line per migration, whatever its docstring's line breaks (a wrapped one
        # read as rows of their own).
        print(f"{mark} {revision:24} {' '.join(description.split())}")
    return 0


def cmd_operator_create(args: argparse.Namespace) -> int:
    def create(session: Session, name: str) -> tuple[str, str]:
        operator, token = create_operator(session, name)
        return f"created operator {operator.name!r}; keep this token, it is shown once:", token

    # Its token is shown once: whoever lost it runs create again, and is told the way on.
    return _print_token(create, args.name, or_else=f"`steelframe operator rotate {args.name}`")


def cmd_operator_rotate(args: argparse.Namespace) -> int:
    def rotate(session: Session, name: str) -> tuple[str, str]:
        return f"new token for {name!r}; the old one no longer works:", rotate_token(session, name)

    return _print_token(rotate, args.name)


def cmd_operator_list(args: argparse.Namespace) -> int:
    for listed in with_database(list_operators):
        line = f"{listed.name:<30} created {listed.created_at:%Y-%m-%d %H:%M:%S}"
        if listed.revoked_at is not None:  # its token no longer works: `rotate` gives one
            line += f"  revoked {listed.revoked_at:%Y-%m-%d %H:%M:%S}"
        print(line)
    return 0


def cmd_operator_revoke(args: argparse.Namespace) -> int:
    try:
        with_database(revoke_token, args.name)
    except SteelframeError as exc:
        print(f"steelframe: {exc.message}", file=sys.stderr)
        return 1
    print(f"revoked {args.name!r}: its token and browser sign-ins no longer work")
    return 0


def _print_token(
    make: Callable[[Session, str], tuple[str, str]], name: str, *, or_else: str | None = None
) -> int:
    """Make the named operator's token (`make` gives a heading and the token), then print
    the heading and the token alone on the last line; a refusal is one line on stderr, and
    a conflict names `or_else`, the command that gives the existing operator a new token."""
    try:
        heading, token = with_database(make, name)
    except SteelframeError as exc:
        hint = f": {or_else} issues it a new token" if or_else and isinstance(exc, Conflict) else ""
        print(f"steelframe: {exc.message}{hint}", file=sys.stderr)
        return 1
    print(heading)
    print(token)
    return 0
