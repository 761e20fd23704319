"""`steelframe dev`: the whole system on embedded defaults, no network, no credentials.

The same SQLite file under ./var as every other command (its own, whatever database and
Redis the shell configures, unless --use-configured-services), the offline runtime, the
demo coding runtime and a token for the `dev` operator that only dev accepts. Whatever else
the environment configures (a real model, a coding agent, a GitHub App) overrides these
defaults. Other packages add their embedded parts through `DEV_EXTRAS`.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import dataclasses
import fcntl
import os
import secrets
import shlex
import shutil
import signal
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any

from aiohttp import web
from sqlalchemy import select

from bot.config import Settings
from bot.config_values import Secret
from bot.db import Database
from bot.executors import start_default_executor
from bot.lifecycle.agents.installed import agent_problem
from bot.models import Operator
from bot.operators import create_operator, hash_token
from steelframe.cli import load_settings
from steelframe.collector import start_serving, tune_for_serving
from steelframe.commands.core import claim_port
from steelframe.commands.memory import upgrade_memory_index
from steelframe.dev_settings import (
    LOCK_FILE,
    TOKEN_FILE,
    dev_folders,
    held_by,
    plan_dev,
    sandbox_write_interval,
)
from steelframe.dev_tokens import DEV_TOKEN_PREFIX
from steelframe.logs import access_logger, configure_logging, quiet_rq_bookkeeping
from steelframe.protocol_log import QuietAppRunner
from steelframe.webhook_relay import local_target, running_relay

if TYPE_CHECKING:  # the parts import every shell: loaded once the port is known free
    from steelframe.parts import Parts

DEV_OPERATOR = "dev"


def dev_token(session: Any, data_dir: Path) -> str:
    """The dev operator's token: the one kept in the data folder while it still works (an
    open TUI survives a restart), else a new one, kept there (0600). Dev tokens carry
    DEV_TOKEN_PREFIX, which a service that is not dev refuses (steelframe/dev_tokens.py)."""
    kept = data_dir / TOKEN_FILE
    operator = session.scalar(select(Operator).where(Operator.name == DEV_OPERATOR))
    with contextlib.suppress(OSError):
        token = kept.read_text().strip()
        if operator is not None and token and operator.token_hash == hash_token(token):
            return token
    token = DEV_TOKEN_PREFIX + secrets.token_urlsafe(32)
    if operator is None:
        operator, _ = create_operator(session, DEV_OPERATOR)
    operator.token_hash = hash_token(token)
    data_dir.mkdir(parents=True, exist_ok=True)
    descriptor = os.open(kept, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(descriptor, "w") as handle:
        handle.write(token + "\n")
    return token


def cmd_dev(args: argparse.Namespace) -> int:
    start_serving()  # the sandbox, migrations and the app make no garbage worth a full walk
    # The default data folder is every command's: `webhooks list` or `memory reindex` in
    # this checkout see the database `dev` runs on.
    configured = load_settings()
    plan = plan_dev(
        configured,
        data_dir=args.data_dir,
        use_configured_services=args.use_configured_services,
    )
    settings = plan.settings
    if plan.ignored:
        print(
            f"steelframe dev: not using {', '.join(plan.ignored)} of this shell: dev keeps its "
            f"own data folder ({settings.data_dir}), database and Redis "
            "(--use-configured-services runs on them)",
            flush=True,
        )
    configure_logging(settings)
    quiet_rq_bookkeeping()  # dev's worker runs in its terminal
    port = settings.port if args.port is None else args.port
    claim_port(args.host or settings.host, port)  # before the sandbox, Redis and database
    held = hold_data_dir(settings.data_dir)
    if held is None:
        return 1
    # Released when dev ends, however it ends (the kernel drops a dead one's).
    with held as lock:

        def serving(url: str, token: str) -> None:
            record_url(lock, url)

        asyncio.run(
            run_dev(
                settings,
                host=args.host or settings.host,
                port=port,
                clients_search=dev_folders(configured),
                ready=serving,
            )
        )
    return 0


def hold_data_dir(folder: Path) -> IO[str] | None:
    """The data folder's lock, held by this process; None, after saying why, when another
    `dev` runs on the folder (`make run` twice, the second with PORT=) or it cannot be made."""
    try:
        folder.mkdir(parents=True, exist_ok=True)
        lock = (folder / LOCK_FILE).open("a+")
    except OSError as exc:  # cli.main would name the port (EACCES) or print a traceback
        print(
            f"steelframe: cannot make the data folder {folder}: {exc.strerror or exc}. "
            "Check --data-dir: the user running dev must be able to write there.",
            file=sys.stderr,
        )
        return None
    try:
        _lock_now(lock)
    except BlockingIOError:
        lock.seek(0)
        holder = held_by(folder, lock.read())
        lock.close()
        where = f" at {holder.url}" if holder.url else ""
        print(
            f"steelframe: another steelframe dev (pid {holder.pid}) runs on the data folder "
            f"{folder}{where}: use that one (its URL and token are in its terminal; the token is "
            f"also in {folder / TOKEN_FILE}), stop it first, or give this one a folder and a "
            "port of its own: steelframe dev --data-dir DIR --port PORT "
            "(make run DATA_DIR=DIR PORT=PORT)",
            file=sys.stderr,
        )
        return None
    lock.truncate(0)
    lock.write(f"{os.getpid()}\n")
    lock.flush()
    return lock


def record_url(lock: IO[str], url: str) -> None:
    """Name the URL dev serves on in its held lock, under its pid: `steelframe tui` and
    `desktop` started with no URL, and `config --dev`, find it there (running_dev). Written
    once the token is kept too, so a client that finds the URL finds the token that works.
    One line appended ("a+"): the pid line is never rewritten under a reader."""
    lock.write(f"{url}\n")
    lock.flush()


def _lock_now(lock: IO[str]) -> None:
    """Take the lock, or raise BlockingIOError: a second try after a moment, as a `steelframe
    config` looking for a running dev holds it shared for an instant (running_dev)."""
    try:
        fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        time.sleep(0.05)
        fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)


async def run_dev(
    settings: Settings,
    *,
    host: str,
    port: int,
    clients_search: list[Path],
    ready: Callable[[str, str], None] | None = None,
) -> None:
    """Dev until a stop is asked for. `clients_search`: the folders `steelframe tui` and
    `desktop` run here look for a dev on (the banner names --data-dir when dev's is not one
    of them)."""
    from steelframe.parts import PARTS
    from steelframe.server import create_app

    # A stop asked for while dev starts (SIGINT, SIGTERM) ends it once the step under way is
    # done, each part started so far stopped: the default action killed dev at once, its
    # redis-server (in a session of its own) and sandbox left running.
    stop = asyncio.Event()
    stopped_by: list[str] = []
    loop = asyncio.get_running_loop()

    def request_stop(sig: signal.Signals) -> None:
        stopped_by.append(sig.name)
        stop.set()

    def stopped_while_starting() -> None:  # as serve says it (docs/operations.md)
        print(f"steelframe dev: {stopped_by[0]} while starting; stopped", flush=True)

    for sig in (signal.SIGINT, signal.SIGTERM):
        with contextlib.suppress(NotImplementedError):
            loop.add_signal_handler(sig, request_stop, sig)
    # The pool the app's start-up would make (steelframe.composition.start_thread_pools),
    # made before dev's own first `to_thread`: else that one makes asyncio's lazy default.
    start_default_executor(loop)
    print("steelframe dev: preparing the database ...", flush=True)
    # Every part started is stopped on the way out, whatever fails after it (a busy port,
    # a bad setting): no orphaned redis-server or sandbox.
    async with contextlib.AsyncExitStack() as parts:
        redis_server = await asyncio.to_thread(_embedded_redis, settings)
        if redis_server is not None:
            parts.callback(redis_server.stop)
            settings = dataclasses.replace(settings, redis_url=redis_server.url)
        if stop.is_set():
            return stopped_while_starting()
        sandbox = await _start_sandbox(settings)
        if sandbox is not None:
            parts.push_async_callback(sandbox.close)
            settings = on_sandbox(settings, sandbox)
        if stop.is_set():
            return stopped_while_starting()
        # An index of an older analysis is rebuilt here, with a progress bar, before the app
        # binds it (which would rebuild it too, but only into the log).
        await asyncio.to_thread(upgrade_memory_index, settings, sys.stdout)
        if stop.is_set():
            return stopped_while_starting()
        app = create_app(settings, accept_dev_tokens=True)
        # One line a request only when asked for, as `serve`: an open GUI or TUI asks often.
        runner = QuietAppRunner(app, access_log=access_logger(settings))
        await runner.setup()
        tune_for_serving()
        parts.push_async_callback(runner.cleanup)
        site = web.TCPSite(runner, host, port)
        await site.start()
        if stop.is_set():  # before the banner: its url and token would be gone at once
            return stopped_while_starting()
        bound = runner.addresses[0][1] if runner.addresses else port
        url = f"http://{host}:{bound}"
        if sandbox is not None:
            sandbox.deliver_to(f"{url}/api/github/webhooks")
            print(
                f"github: sandbox at {sandbox.url} · repo {settings.repo} (no credentials)",
                flush=True,
            )
        elif settings.webhook_proxy_url:
            relay = running_relay(settings.webhook_proxy_url, local_target(host, bound))
            await parts.enter_async_context(relay)
            print(f"webhooks: through the relay {settings.webhook_proxy_url}", flush=True)
        database: Database = app[PARTS].db
        token = await database.run(dev_token, settings.data_dir)
        if ready is not None:  # before the banner: who reads it can use the URL at once
            ready(url, token)
        print(
            f"runtime: {settings.runtime} · database: {_safe_url(settings.database_url)}",
            flush=True,
        )
        print(f"coding: {await asyncio.to_thread(_coding_line, settings)}", flush=True)
        print(f"url: {url}", flush=True)
        print(f"token: {token}", flush=True)
        worker = _start_worker(app[PARTS])
        if worker is not None:
            parts.push_async_callback(asyncio.to_thread, worker.stop)
        steps = _next_steps(url, token, settings, sandbox, clients_search=clients_search)
        print(steps, flush=True)
        try:
            await stop.wait()
        finally:
            print("steelframe dev: shutting down", flush=True)


def on_sandbox(settings: Settings, sandbox: Any) -> Settings:
    """The settings that point every part at the local sandbox's App."""
    return dataclasses.replace(
        settings,
        app_id=sandbox.app_id,
        private_key=Secret(sandbox.private_key),
        private_key_path=None,
        webhook_secret=Secret(sandbox.webhook_secret),
        github_api_url=sandbox.url,
        github_write_interval=sandbox_write_interval(settings),
    )


async def _start_sandbox(settings: Settings) -> Any:
    """The local GitHub sandbox, unless the environment configures a real GitHub App."""
    if settings.github_configured:
        return None
    from github_sandbox.devmode import start_dev_sandbox

    print("steelframe dev: starting the local GitHub sandbox ...", flush=True)
    secret = settings.webhook_secret.reveal() if settings.webhook_secret else None
    return await start_dev_sandbox(
        settings.data_dir / "github-sandbox", settings.repo, webhook_secret=secret
    )


def _embedded_redis(settings: Settings) -> Any:
    """A Redis of our own when none is configured (the task queue needs one)."""
    if settings.redis_url:
        return None
    from steelframe.embedded_redis import start_embedded_redis

    print("steelframe dev: starting an embedded Redis ...", flush=True)
    return start_embedded_redis(settings.data_dir / "redis")


def _start_worker(parts: Parts) -> Any:
    """An in-process lifecycle worker (RQ SimpleWorker on a thread) on the service's parts,
    composed by the same root as `steelframe worker`, with the web process's database,
    Redis and memory index as its overrides."""
    from bot.lifecycle.context import github_factory
    from steelframe.dev_worker import WorkerThread
    from steelframe.worker_context import build_worker_context

    settings = parts.settings
    if parts.redis is None:
        return None
    ctx = build_worker_context(
        settings,
        environ=os.environ,
        db=parts.db,
        connection=parts.redis,
        github=github_factory(settings),
        memory=parts.memory,
    )
    worker = WorkerThread(ctx)
    worker.start()
    print(f"worker: in process on queue {ctx.queue_name}", flush=True)
    return worker


def _coding_line(settings: Settings) -> str:
    agent = settings.coding_agent or ("command" if settings.coding_command else None)
    if agent == "demo":
        return (
            "demo runtime (writes a note, changes no code) · for a real agent set "
            "STEELFRAME_CODING_AGENT=claude|codex|aider (docs/runtimes.md)"
        )
    if agent is None:
        return "none configured (tasks wait for info)"
    line = agent + (f" · model {settings.coding_model}" if settings.coding_model else "")
    # `STEELFRAME_CODING_AGENT=claude make run` before installing Claude Code: said here,
    # not found out from the first task's failure.
    problem = agent_problem(agent)  # runs the agent's `--version` (on a thread)
    return (
        f"{line} · {problem}; its tasks fail until that is fixed (make doctor)" if problem else line
    )


def _next_steps(
    url: str, token: str, settings: Settings, sandbox: Any, *, clients_search: list[Path]
) -> str:
    """What a newcomer can do now, printed once everything is up. `steelframe tui` and
    `desktop` find this dev by its lock, the URL and the token with no copying (no token on
    a command line, where the process list shows it), on their own when it runs on one of
    `clients_search` (the folders they search from here), else told its folder."""
    ask = "file an issue for the login page, which shows a blank screen after a wrong password"
    steelframe = runnable("steelframe")
    folder = settings.data_dir.resolve()
    where = "" if folder in clients_search else f" --data-dir {shlex.quote(str(folder))}"
    lines = [
        "",
        "Try it: open Chat in another terminal",
        f"  {steelframe} tui{where}",
        f"  and type: {ask}",
        "  (or, without the TUI:",
        f"  curl -s -X POST {url}/api/operator/chat -H 'Authorization: Bearer {token}' \\",
        f'       -d \'{{"message": "{ask}"}}\')',
        f"The web GUI in its own window: {steelframe} desktop{where}",
        f"Check the configuration: {steelframe} doctor",
    ]
    if steelframe != "steelframe":
        bin_folder = Path(steelframe).parent
        lines.append(
            f"(to type them bare: source {bin_folder}/activate, or PATH={bin_folder}:$PATH)"
        )
    if settings.coding_agent == "demo":
        lines += [
            "Chat files the issue, a task runs the demo coding runtime, and a pull request",
            "appears. A one-line issue (file an issue for the flaky login test) gets a",
            "question first: Discuss it in Chat, draft a Decision, Publish it, and the task",
            "resumes to a pull request.",
        ]
    if sandbox is not None:
        lines.append(f"Issues and pull requests open in a browser: {sandbox.url}/{settings.repo}")
    lines.append(f"Board: curl -s -H 'Authorization: Bearer {token}' {url}/api/operator/board")
    return "\n".join(lines)


def runnable(script: str) -> str:
    """`script` as it can be pasted here: the bare name when PATH finds this install's, else
    the absolute path of the one beside this Python (a venv that is not on PATH)."""
    beside = Path(sys.executable).with_name(script)
    found = shutil.which(script)
    if found is not None and beside.exists() and Path(found).resolve() == beside.resolve():
        return script
    return str(beside) if beside.exists() else script


def _safe_url(url: str) -> str:
    from sqlalchemy.engine import make_url

    return make_url(url).render_as_string(hide_password=True)
