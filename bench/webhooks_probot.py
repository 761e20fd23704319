"""Webhook intake beside Probot: deliveries per second and latency under wrk, same payload,
same load, each server pinned to one core, rounds interleaved.

- probot: Probot (pinned below, installed from the npm registry into a cache folder on first
  use) with an app that subscribes to `issues`; it verifies, parses and dispatches, and
  stores and dedupes nothing.
- steelframe: `steelframe serve` (or `--processes 2` with `--processes`): verifies, stores
  durably (the delivery is committed before the answer), dedupes, processes after the answer.

wrk (64 connections, 1 thread on the other core) sends GitHub's real `issues.opened` example,
signed, with a unique X-GitHub-Delivery per request. After each Steelframe round the stored
deliveries are counted against wrk's acknowledged requests: none may be lost.

    python -m bench.webhooks_probot [--db sqlite,postgres] [--seconds 10] [--rounds 3]
    python -m bench.webhooks_probot --processes       # serve --processes 2 vs 1, unpinned
    python -m bench.webhooks_probot --baseline /tmp/base  # and another revision, same rounds
    python -m bench.webhooks_probot --via-nginx       # each server behind nginx (deploy/)
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

from bench.webhooks import PG_URL, SECRET, payload

PROBOT = "probot@14.3.2"
CACHE = Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "steelframe-bench"
PROBOT_APP = "module.exports = (app) => { app.on('issues', async () => {}); };\n"


def missing_tools() -> list[str]:
    return [tool for tool in ("node", "npm", "wrk", "taskset") if shutil.which(tool) is None]


def probot_dir() -> Path:
    folder = CACHE / PROBOT.replace("@", "-")
    if not (folder / "node_modules/probot/bin/probot.js").exists():
        print(f"installing {PROBOT} from the npm registry into {folder} ...", flush=True)
        folder.mkdir(parents=True, exist_ok=True)
        subprocess.run(
            ["npm", "install", "--no-audit", "--no-fund", "--prefix", str(folder), PROBOT],
            check=True,
            capture_output=True,
        )
    (folder / "app.cjs").write_text(PROBOT_APP)
    return folder


def wrk_script(body: bytes, scratch: Path) -> Path:
    from webhooks.signature import signature_for

    signature = signature_for(SECRET, body)
    script = scratch / "deliveries.lua"
    script.write_text(
        "wrk.method = 'POST'\n"
        f"wrk.body = [==[{body.decode()}]==]\n"
        "wrk.headers['Content-Type'] = 'application/json'\n"
        "wrk.headers['X-GitHub-Event'] = 'issues'\n"
        f"wrk.headers['X-Hub-Signature-256'] = '{signature}'\n"
        "wrk.headers['User-Agent'] = 'GitHub-Hookshot/bench'\n"
        "local counter = 0\n"
        "local prefix = tostring(os.time()) .. '-' .. tostring(math.random(1, 1e9)) .. '-'\n"
        "request = function()\n"
        "  counter = counter + 1\n"
        "  wrk.headers['X-GitHub-Delivery'] = prefix .. counter\n"
        "  return wrk.format(nil, '/api/github/webhooks')\n"
        "end\n"
    )
    return script


SERVER_CORE = "1"
LOAD_CORE = "0"


def pinned(command: list[str], core: str | None) -> list[str]:
    """`command` on one core (`taskset`), or wherever the kernel puts it (None)."""
    return command if core is None else ["taskset", "-c", core, *command]


@contextmanager
def server(
    command: list[str],
    env: dict[str, str],
    port: int,
    cwd: Path | None = None,
    core: str | None = SERVER_CORE,
    listeners: int = 1,
) -> Iterator[subprocess.Popen[bytes]]:
    """The server, once `listeners` of its processes listen on `port` (wrk's connections
    are kept alive: any opened before a process listens never reach it)."""
    log = tempfile.TemporaryFile()
    process = subprocess.Popen(pinned(command, core), env=env, cwd=cwd, stdout=log, stderr=log)
    try:
        deadline = time.monotonic() + 60
        # Listening on the port, and this process: the port was free when chosen, but another
        # program (a test's server, when the smoke run shares the machine) may have taken it
        # since, and wrk must never measure, or flood, a stranger.
        while _listening(process.pid, port) < listeners:
            if process.poll() is not None or time.monotonic() > deadline:
                log.seek(0)
                said = log.read().decode(errors="replace")[-2000:]
                raise ServerDidNotStart(f"{command[0]} did not start on port {port}:\n{said}")
            time.sleep(0.2)
        yield process
    finally:
        process.terminate()
        try:
            process.wait(30)
        except subprocess.TimeoutExpired:
            process.kill()


class ServerDidNotStart(RuntimeError):
    pass


def _listening(pid: int, port: int) -> int:
    """How many of the process `pid` and its children (`taskset` execs, `--processes`
    forks) listen on `port`."""
    import psutil

    try:
        process = psutil.Process(pid)
        tree = [process, *process.children(recursive=True)]
    except psutil.NoSuchProcess:
        return 0
    count = 0
    for each in tree:
        try:
            sockets = each.net_connections(kind="tcp")
        except psutil.NoSuchProcess:
            continue
        count += any(s.status == psutil.CONN_LISTEN and s.laddr.port == port for s in sockets)
    return count


def on_a_free_port(
    round_: Callable[[int], dict[str, float]], attempts: int = 3
) -> dict[str, float]:
    """Run a round on a port free when chosen; another, if a server could not bind it."""
    for attempt in range(attempts):
        try:
            return round_(_free_port())
        except ServerDidNotStart:
            if attempt == attempts - 1:
                raise
    raise AssertionError("unreachable")


def cpu_seconds(pid: int) -> float:
    """CPU time (user + system) of a server and its child processes so far: `taskset`
    execs the server, so the pid is the server's own."""
    import psutil

    process = psutil.Process(pid)
    total = 0.0
    for each in [process, *process.children(recursive=True)]:
        times = each.cpu_times()
        total += times.user + times.system
    return total


# A webhook route like deploy/nginx.conf's, in front of one server, with an upstream
# keepalive pool (deploy/nginx.conf resolves the instances per request instead, which keeps
# no pool: one connection a delivery); either way the connections that carry deliveries stay
# on serve's fast lane (steelframe/lanes.py).
NGINX_CONF = """
worker_processes 1;
daemon off;
pid {prefix}/nginx.pid;
error_log stderr error;
{user}
events {{ worker_connections 1024; }}
http {{
    access_log off;
    client_body_temp_path {prefix}/body;
    proxy_temp_path {prefix}/proxy;
    upstream webhooks {{
        server 127.0.0.1:{upstream};
        keepalive 16;
    }}
    server {{
        listen 127.0.0.1:{port};
        client_max_body_size 26m;
        location = /api/github/webhooks {{
            proxy_pass http://webhooks;
            proxy_http_version 1.1;
            proxy_set_header Connection "";
            proxy_set_header Host $host;
            proxy_set_header X-Forwarded-For $proxy_add_x_forwarded_for;
            proxy_set_header X-Forwarded-Proto $scheme;
            proxy_set_header X-Request-Id $request_id;
        }}
    }}
}}
"""


@contextmanager
def in_front(upstream: int, args: argparse.Namespace, core: str | None) -> Iterator[int]:
    """The port wrk sends to: the server's own, or with `--via-nginx` that of an nginx in
    front of it, on wrk's `core` (so a pinned server's core stays its own)."""
    if not args.via_nginx:
        yield upstream
        return
    with tempfile.TemporaryDirectory() as prefix:
        port = _free_port()
        user = "user root;" if os.geteuid() == 0 else ""  # its temp folders are ours
        conf = Path(prefix) / "nginx.conf"
        conf.write_text(NGINX_CONF.format(prefix=prefix, user=user, upstream=upstream, port=port))
        command = ["nginx", "-p", prefix, "-c", str(conf)]
        with server(command, dict(os.environ), port, core=core):
            yield port


def measured(
    process: subprocess.Popen[bytes],
    port: int,
    script: Path,
    args: argparse.Namespace,
    core: str | None = LOAD_CORE,
) -> dict[str, float]:
    """wrk's figures and the server's CPU time during the run: on a machine shared with
    other work the rate moves with what else runs on the server's core, while deliveries
    per CPU-second of the server (what one free core would sustain) moves much less."""
    with in_front(port, args, core) as target:
        before = cpu_seconds(process.pid)
        figures = wrk(target, script, args.seconds, args.connections, core)
    figures["cpu"] = cpu_seconds(process.pid) - before
    figures["per_cpu_s"] = figures["acked"] / figures["cpu"] if figures["cpu"] else 0.0
    return figures


def wrk(
    port: int, script: Path, seconds: int, connections: int, core: str | None = LOAD_CORE
) -> dict[str, float]:
    command = ["wrk", "-t1", f"-c{connections}", f"-d{seconds}s", "--latency", "-s", str(script)]
    result = subprocess.run(
        pinned([*command, f"http://127.0.0.1:{port}"], core),
        capture_output=True,
        text=True,
        check=True,
    )
    out = result.stdout
    total = int(re.search(r"(\d+) requests in", out).group(1))  # type: ignore[union-attr]
    bad = re.search(r"Non-2xx or 3xx responses: (\d+)", out)
    # Percentiles anchored at the line start: "+/- Stdev 75.99%" is not the 99th.
    return {
        "rps": float(re.search(r"Requests/sec:\s+([\d.]+)", out).group(1)),  # type: ignore[union-attr]
        "p50": _ms(re.search(r"^\s+50%\s+(\S+)", out, re.M).group(1)),  # type: ignore[union-attr]
        "p99": _ms(re.search(r"^\s+99%\s+(\S+)", out, re.M).group(1)),  # type: ignore[union-attr]
        "acked": total - (int(bad.group(1)) if bad else 0),
    }


def _ms(text: str) -> float:
    # wrk writes latencies as 812.00us, 3.21ms, 1.02s or 1.50m.
    value, unit = re.fullmatch(r"([\d.]+)(us|ms|s|m)", text).groups()  # type: ignore[union-attr]
    return float(value) * {"us": 0.001, "ms": 1.0, "s": 1000.0, "m": 60_000.0}[unit]


def _free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _drained(database_url: str, timeout: float = 600.0) -> float:
    """Seconds from the end of the load until `serve` has processed every delivery it
    stored (the backlog a burst leaves: processing gives way to intake while it lasts)."""
    from sqlalchemy import func, select

    from bot.db import Database
    from webhooks.deliveries import DeliveryStatus, WebhookDelivery

    started = time.monotonic()
    database = Database.from_url(database_url)
    unprocessed = (
        select(func.count())
        .select_from(WebhookDelivery)
        .where(WebhookDelivery.status.in_([DeliveryStatus.RECEIVED, DeliveryStatus.PROCESSING]))
    )
    try:
        while database.call(lambda s: s.scalar(unprocessed)):
            if time.monotonic() - started > timeout:
                return float("inf")
            time.sleep(0.1)
        return time.monotonic() - started
    finally:
        database.dispose()


def _stored(database_url: str) -> int:
    from sqlalchemy import func, select

    from bot.db import Database
    from webhooks.deliveries import WebhookDelivery

    database = Database.from_url(database_url)
    try:
        return int(
            database.call(lambda s: s.scalar(select(func.count()).select_from(WebhookDelivery)))
        )
    finally:
        database.dispose()


@contextmanager
def fresh_database(kind: str, scratch: Path) -> Iterator[str]:
    """A database of its own for one round, gone after it, with what the round wrote on
    disk by then: a round's writes (600 MB of bodies) left to the kernel's writeback, or to
    PostgreSQL's next checkpoint, slowed the rounds after it. Steelframe's first round ran
    at 1.00x Probot and the next three at 0.82-0.89x, Probot's own rate unchanged."""
    if kind == "sqlite":
        path = scratch / f"bench-{time.monotonic_ns()}.db"
        try:
            yield f"sqlite:///{path}"
        finally:
            for leftover in (
                path,
                path.with_name(f"{path.name}-wal"),
                path.with_name(f"{path.name}-shm"),
            ):
                leftover.unlink(missing_ok=True)
            os.sync()
        return
    from sqlalchemy import create_engine, text
    from sqlalchemy.exc import DBAPIError

    schema = f"bench_{time.monotonic_ns()}"
    admin = create_engine(PG_URL, isolation_level="AUTOCOMMIT")
    with admin.connect() as connection:
        connection.execute(text(f'CREATE SCHEMA "{schema}"'))
    try:
        yield f"{PG_URL}?options=-csearch_path%3D{schema}"
    finally:
        with admin.connect() as connection:
            connection.execute(text(f'DROP SCHEMA "{schema}" CASCADE'))
            try:
                connection.execute(text("CHECKPOINT"))
            except DBAPIError as exc:  # a role without pg_checkpoint
                print(f"  (no CHECKPOINT between rounds: {exc.orig})", flush=True)
        admin.dispose()
        os.sync()


def steelframe_round(
    database_url: str,
    scratch: Path,
    script: Path,
    args: argparse.Namespace,
    processes: int,
    checkout: Path | None = None,
    pin: bool = True,
) -> dict[str, float]:
    """One round of `serve`, from this checkout or from `checkout` (another revision's
    tree, e.g. `git worktree add /tmp/base main`, run with this environment); `pin=False`
    lets the kernel place `serve` and wrk on any core."""
    server_core, load_core = (SERVER_CORE, LOAD_CORE) if pin else (None, None)

    def on(port: int) -> dict[str, float]:
        env = {k: v for k, v in os.environ.items() if not k.startswith("STEELFRAME_")}
        env |= {
            "STEELFRAME_DATABASE_URL": database_url,
            "STEELFRAME_DATA_DIR": str(scratch / f"var-{port}"),
            "WEBHOOK_SECRET": SECRET,
            "STEELFRAME_LOG_LEVEL": "ERROR",
        }
        command = [sys.executable, "-m", "steelframe.cli", "serve", "--port", str(port)]
        command += ["--loop", args.loop]
        if processes > 1:
            env["STEELFRAME_REDIS_URL"] = args.redis_url
            command += ["--processes", str(processes)]
        with server(
            command, env, port, cwd=checkout, core=server_core, listeners=processes
        ) as process:
            figures = measured(process, port, script, args, load_core)
            figures["drained"] = _drained(database_url)
            return figures

    figures = on_a_free_port(on)
    figures["stored"] = _stored(database_url)
    return figures


def probot_round(folder: Path, script: Path, args: argparse.Namespace) -> dict[str, float]:
    from github_sandbox.keys import generate_app_keys

    key = generate_app_keys()[0]

    def on(port: int) -> dict[str, float]:
        env = dict(os.environ) | {
            "APP_ID": "1",
            "PRIVATE_KEY": key,
            "WEBHOOK_SECRET": SECRET,
            "PORT": str(port),
            "HOST": "127.0.0.1",
            "LOG_LEVEL": "fatal",
            "NODE_ENV": "production",
        }
        command = ["node", str(folder / "node_modules/probot/bin/probot.js"), "run", "./app.cjs"]
        with server(command, env, port, cwd=folder) as process:
            return measured(process, port, script, args)

    return on_a_free_port(on)


def _median(rows: list[dict[str, float]], key: str) -> float:
    return statistics.median(row[key] for row in rows)


def compare(args: argparse.Namespace) -> None:
    folder = probot_dir()
    with tempfile.TemporaryDirectory() as tmp:
        scratch = Path(tmp)
        script = wrk_script(payload(), scratch)
        for kind in args.db:
            probot: list[dict[str, float]] = []
            steel: list[dict[str, float]] = []
            base: list[dict[str, float]] = []
            for round_no in range(args.rounds):
                print(f"{kind}: round {round_no + 1}/{args.rounds} ...", flush=True)
                probot.append(probot_round(folder, script, args))
                with fresh_database(kind, scratch) as url:
                    steel.append(steelframe_round(url, scratch, script, args, 1))
                if args.baseline is not None:
                    with fresh_database(kind, scratch) as url:
                        base.append(steelframe_round(url, scratch, script, args, 1, args.baseline))
            lost = sum(max(0, row["acked"] - row["stored"]) for row in steel + base)
            print(
                f"webhook intake on {kind}{' through nginx' if args.via_nginx else ''}, "
                f"{args.connections} connections, "
                f"{args.seconds} s x {args.rounds} interleaved rounds (medians)"
            )
            named = [("probot", probot), ("steelframe", steel)] + [("baseline", base)] * bool(base)
            for name, rows in named:
                drained = (
                    ""
                    if name == "probot"
                    else f"  all processed {_median(rows, 'drained'):.1f} s after"
                )
                print(
                    f"  {name:11} {_median(rows, 'rps'):9.0f} deliveries/s"
                    f"  p50 {_median(rows, 'p50'):6.2f} ms  p99 {_median(rows, 'p99'):6.2f} ms"
                    f"  {_median(rows, 'per_cpu_s'):6.0f} per CPU-second{drained}"
                )
            rounds = ", ".join(
                f"{s['rps'] / p['rps']:.2f}x ({s['rps']:.0f}/{p['rps']:.0f})"
                for p, s in zip(probot, steel, strict=True)
            )
            print(f"  rps ratio per round: {rounds}")
            rps = _median(steel, "rps") / _median(probot, "rps")
            p99 = _median(steel, "p99") / _median(probot, "p99")
            per_cpu = _median(steel, "per_cpu_s") / _median(probot, "per_cpu_s")
            print(
                f"  ratio rps {rps:.2f}x (target >= 1.0x)  p99 {p99:.2f}x (target <= 1.0x)"
                f"  per CPU-second {per_cpu:.2f}x  acknowledged but not stored: {lost}"
            )
            if base:
                steel_cpu, base_cpu = _median(steel, "per_cpu_s"), _median(base, "per_cpu_s")
                print(
                    f"  steelframe vs baseline ({args.baseline}): per CPU-second "
                    f"{steel_cpu / base_cpu:.2f}x; baseline vs probot per CPU-second "
                    f"{base_cpu / _median(probot, 'per_cpu_s'):.2f}x"
                )


def processes(args: argparse.Namespace) -> None:
    """`serve --processes 2` against one process, nothing pinned: the machine's cores are
    shared by wrk, the database and `serve`, as they would be in production."""
    with tempfile.TemporaryDirectory() as tmp:
        scratch = Path(tmp)
        script = wrk_script(payload(), scratch)
        for kind in args.db:
            one: list[dict[str, float]] = []
            two: list[dict[str, float]] = []
            for round_no in range(args.rounds):
                print(f"{kind}: round {round_no + 1}/{args.rounds} ...", flush=True)
                for count, rows in ((1, one), (2, two)):
                    with fresh_database(kind, scratch) as url:
                        rows.append(steelframe_round(url, scratch, script, args, count, pin=False))
            lost = sum(max(0, row["acked"] - row["stored"]) for row in one + two)
            print(
                f"serve --processes 2 vs 1 on {kind}, nothing pinned, "
                f"{args.seconds} s x {args.rounds} interleaved rounds (medians)"
            )
            for name, rows in (("1 process", one), ("2 processes", two)):
                print(
                    f"  {name:11} {_median(rows, 'rps'):9.0f} deliveries/s"
                    f"  p99 {_median(rows, 'p99'):6.2f} ms"
                    f"  {_median(rows, 'cpu'):5.1f} CPU-seconds"
                )
            rounds = ", ".join(f"{t['rps'] / o['rps']:.2f}x" for o, t in zip(one, two, strict=True))
            print(f"  ratio per round: {rounds}")
            print(
                f"  ratio {_median(two, 'rps') / _median(one, 'rps'):.2f}x (target >= 1.6x)"
                f"  acknowledged but not stored: {lost}"
            )


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--db", default="sqlite,postgres", type=lambda v: v.split(","))
    parser.add_argument("--seconds", type=int, default=10, help="length of one wrk run")
    parser.add_argument("--rounds", type=int, default=3, help="interleaved rounds")
    parser.add_argument("--connections", type=int, default=64, help="wrk connections")
    parser.add_argument("--processes", action="store_true", help="--processes 2 against 1")
    parser.add_argument("--redis-url", default="redis://127.0.0.1:6379/14")
    parser.add_argument(
        "--loop", default="auto", choices=("auto", "uvloop", "asyncio"), help="serve --loop"
    )
    parser.add_argument("--smoke", action="store_true", help="one short round on SQLite")
    parser.add_argument(
        "--via-nginx",
        action="store_true",
        help="wrk reaches each server through nginx, as deploy/nginx.conf routes webhooks",
    )
    parser.add_argument(
        "--baseline",
        type=Path,
        help="another revision's tree whose serve runs in the same interleaved rounds",
    )
    args = parser.parse_args(argv)
    missing = missing_tools() + (["nginx"] if args.via_nginx and not shutil.which("nginx") else [])
    if missing:
        print(
            f"bench.webhooks_probot did not run: missing {', '.join(missing)} "
            "(Debian packages nodejs, npm, wrk, util-linux; nginx-light for --via-nginx)"
        )
        return
    if args.smoke:
        args.db, args.seconds, args.rounds, args.connections = ["sqlite"], 1, 1, 4
    processes(args) if args.processes else compare(args)


if __name__ == "__main__":
    main()
