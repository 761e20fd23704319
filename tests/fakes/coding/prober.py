"""A hostile coding runtime that tries the ways out `attacker.py` does not: the host's
services over IPv6, abstract and filesystem Unix sockets, the egress proxy asked for local
addresses in every spelling (CONNECT and plain `http://`), the sandbox's pid 1 (its
environment and descriptors), writing the read-only system, and a daemon left behind.
Each is reported as `ATTEMPT <name>: blocked (<why>)` or `ATTEMPT <name>: SUCCEEDED (<what>)`
on stdout (the run's private log). Args: PORTS_FILE DAEMON_MARKER [ALLOWED_PORT] (a path: the
daemon makes it once it runs).
PORTS_FILE (JSON, written by the test once the service listens): {name: port}.

With ALLOWED_PORT (a server on 127.0.0.1 the run may reach, answering /redirect?to=URL with a
302 to URL), only the proxy's tricks run (`egress_tricks`): IPv6 addresses that carry a
loopback IPv4 one, spellings the host parser may read differently (fullwidth, IDN, trailing
dots, octal), an allowed address on another port, URLs whose userinfo or fragment names the
allowed one, a redirect from the allowed server to a service, HTTP/2 and a WebSocket
upgrade through the plain proxy."""

import json
import os
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request

sys.path.insert(0, os.path.dirname(__file__))
from _protocol import emit, read_prompt

ports_file, daemon_marker = sys.argv[1:3]
allowed_port = int(sys.argv[3]) if len(sys.argv) > 3 else None


def report(name: str, ok: bool, why: str) -> None:
    print(f"ATTEMPT {name}: {'SUCCEEDED' if ok else 'blocked'} ({why})", flush=True)


def connect(name: str, family: socket.AddressFamily, address: object) -> None:
    try:
        with socket.socket(family, socket.SOCK_STREAM) as probe:
            probe.settimeout(3)
            probe.connect(address)
            report(name, True, "connected")
    except OSError as exc:
        report(name, False, type(exc).__name__)


def abstract_sockets() -> None:
    """Abstract Unix sockets belong to a network namespace: only the sandbox's are listed."""
    with open("/proc/net/unix") as table:
        names = [line.split()[-1] for line in table.readlines()[1:] if len(line.split()) > 7]
    abstract = [n for n in names if n.startswith("@")]
    report("abstract_sockets_listed", bool(abstract), f"{len(abstract)} listed")
    for name in abstract[:10]:
        connect(f"abstract_{len(name)}", socket.AF_UNIX, "\0" + name[1:])


def proxy_ask(name: str, request: str) -> None:
    proxy = os.environ.get("HTTP_PROXY", "")
    if not proxy:
        report(name, False, "no proxy")
        return
    try:
        port = int(proxy.rsplit(":", 1)[1].strip("/"))
        with socket.create_connection(("127.0.0.1", port), 5) as tunnel:
            tunnel.sendall(request.encode())
            answer = tunnel.recv(400).decode(errors="replace")
        status = answer.split("\r\n", 1)[0]
        why = answer.rsplit("steelframe egress: ", 1)[-1].strip() if "egress: " in answer else ""
    except (OSError, ValueError) as exc:
        report(name, False, type(exc).__name__)
        return
    # 200: tunnelled or forwarded; 101: upgraded; -/+: a Redis answer.
    succeeded = " 200 " in status or " 101 " in status or status.startswith("-") or "+" in status
    report(name, succeeded, f"{status}: {why}")


def through_proxy(ports: dict[str, int]) -> None:
    spellings = [
        "localhost",
        "localhost.",
        "127.1",
        "2130706433",
        "0x7f000001",
        "0",
        "0.0.0.0",
        "[::1]",
        "[::ffff:127.0.0.1]",
        "[::ffff:7f00:1]",
        "[::]",
        "[0:0:0:0:0:0:0:1]",
        "steelframe-sandbox",
        "ip6-localhost",
    ]
    for target, port in ports.items():
        for index, host in enumerate(spellings):
            authority = f"{host}:{port}"
            proxy_ask(
                f"{target}_connect_{index}",
                f"CONNECT {authority} HTTP/1.1\r\nHost: {authority}\r\n\r\n",
            )
            proxy_ask(
                f"{target}_plain_{index}",
                f"GET http://{authority}/ HTTP/1.1\r\nHost: {authority}\r\n\r\n",
            )
        # The allowlisted name in the userinfo, the local address as the host.
        proxy_ask(
            f"{target}_userinfo",
            f"GET http://localhost@127.0.0.1:{port}/ HTTP/1.1\r\nHost: localhost\r\n\r\n",
        )


# IPv6 addresses that carry 127.0.0.1 (6to4, NAT64 well-known and local-use, IPv4-
# compatible, -translated, Teredo with 127.0.0.1 as its server) and site-local: an operator
# may allowlist one by mistake, and the proxy must refuse it by what it carries.
EMBEDDED_LOOPBACK = [
    "[2002:7f00:1::1]",
    "[64:ff9b::7f00:1]",
    "[64:ff9b:1::7f00:1]",
    "[::7f00:1]",
    "[::ffff:0:7f00:1]",
    "[2001:0:7f00:1::1]",
    "[fec0::1]",
]
# Spellings of a local name a parser may read otherwise than the resolver does.
ODD_SPELLINGS = [
    "\uff4c\uff4f\uff43\uff41\uff4c\uff48\uff4f\uff53\uff54",  # fullwidth localhost
    "LOCALHOST.",
    "localhost..",
    "127.0.0.1.",
    "0177.0.0.1",
    "127.000.000.001",
    "xn--localhost-",
    "local\u200bhost",
]


def egress_tricks(ports: dict[str, int], allowed: int) -> None:
    """The proxy's edges, with a server on 127.0.0.1:`allowed` the run may reach."""
    for target, port in ports.items():
        for index, host in enumerate(EMBEDDED_LOOPBACK + ODD_SPELLINGS):
            authority = f"{host}:{port}"
            proxy_ask(f"{target}_trick_connect_{index}", f"CONNECT {authority} HTTP/1.1\r\n\r\n")
            proxy_ask(
                f"{target}_trick_plain_{index}",
                f"GET http://{authority}/ HTTP/1.1\r\nHost: {authority}\r\n\r\n",
            )
        # The allowed address on this port; the allowed one in userinfo or fragment.
        proxy_ask(f"{target}_allowed_host_other_port", f"CONNECT 127.0.0.1:{port} HTTP/1.1\r\n\r\n")
        for index, url in enumerate(
            [
                f"http://127.0.0.1:{allowed}@127.0.0.1:{port}/",
                f"http://127.0.0.1:{port}#@127.0.0.1:{allowed}/",
                f"http://127.0.0.1:{port}\\@127.0.0.1:{allowed}/",
                f"http://127.0.0.1:{port}?@127.0.0.1:{allowed}/",
            ]
        ):
            proxy_ask(f"{target}_url_{index}", f"GET {url} HTTP/1.1\r\nHost: x\r\n\r\n")
        follow_redirect(f"{target}_redirect", allowed, f"http://127.0.0.1:{port}/")
        follow_redirect(f"{target}_redirect_6to4", allowed, f"http://[2002:7f00:1::1]:{port}/")
    # HTTP/2 with prior knowledge and a WebSocket upgrade, both to the plain proxy.
    proxy_ask("h2_preface", "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n")
    upgrade = (
        f"GET http://127.0.0.1:{allowed}/upgrade HTTP/1.1\r\nHost: x\r\nConnection: Upgrade\r\n"
        "Upgrade: websocket\r\nSec-WebSocket-Version: 13\r\n"
        "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n\r\n"
    )
    proxy_ask("websocket_upgrade", upgrade)


def follow_redirect(name: str, allowed: int, to: str) -> None:
    """The allowed server redirects to `to`; urllib follows through the proxy variables."""
    url = f"http://127.0.0.1:{allowed}/redirect?to={to}"
    try:
        with urllib.request.urlopen(url, timeout=10) as answer:
            report(name, True, f"{answer.status} from {answer.url}")
    except urllib.error.HTTPError as exc:
        why = exc.read().decode(errors="replace").strip()
        report(
            name,
            False,
            f"HTTP/1.1 {exc.code} {exc.reason}: {why.removeprefix('steelframe egress: ')}",
        )
    except OSError as exc:
        report(name, False, type(exc).__name__)


def pid_one() -> None:
    try:
        with open("/proc/1/environ", "rb") as raw:
            environ = raw.read()
        report("pid1_environ", bool(environ), f"{len(environ)} bytes")
    except OSError as exc:
        report("pid1_environ", False, type(exc).__name__)
    try:
        fds = os.listdir("/proc/1/fd")
    except OSError as exc:
        report("pid1_fds", False, type(exc).__name__)
        return
    read = 0
    for fd in fds:
        try:
            with open(f"/proc/1/fd/{fd}", "rb") as raw:
                read += len(raw.read(65536))
        except OSError:
            continue
    report("pid1_fds", read > 0, f"{len(fds)} listed, {read} bytes read")


def writes() -> None:
    for path in ("/usr/steelframe-was-here", "/etc/passwd", "/run/steelframe/prompt.md"):
        name = f"write_{path.split('/')[1]}_{os.path.basename(path)}"
        try:
            with open(path, "a") as out:
                out.write("x")
            report(name, True, "written")
        except OSError as exc:
            report(name, False, type(exc).__name__)


def daemon() -> None:
    """A grandchild in a session of its own that ignores SIGTERM and outlives the command."""
    code = (
        "import signal,sys,time;signal.signal(signal.SIGTERM,signal.SIG_IGN);"
        "open(sys.argv[1],'w').close();time.sleep(600)"
    )
    daemon = subprocess.Popen(
        [sys.executable, "-c", code, daemon_marker],
        start_new_session=True,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    while not os.path.exists(daemon_marker) and daemon.poll() is None:
        time.sleep(0.05)


read_prompt()
with open(ports_file) as found:
    ports: dict[str, int] = json.load(found)
if allowed_port is not None:
    egress_tricks(ports, allowed_port)
    with open("CHANGE.md", "w") as out:
        out.write("probed the proxy\n")
    emit(type="result", status="done", summary="Probed the proxy.")
    sys.exit(0)
for target, port in ports.items():
    connect(f"{target}_ipv6", socket.AF_INET6, ("::1", port))
    connect(f"{target}_ipv4", socket.AF_INET, ("127.0.0.1", port))
for path in ("/var/run/postgresql/.s.PGSQL.5432", "/run/postgresql/.s.PGSQL.5432"):
    connect(f"unix_{path.split('/')[2]}", socket.AF_UNIX, path)
abstract_sockets()
through_proxy(ports)
pid_one()
writes()
daemon()
with open("CHANGE.md", "w") as out:
    out.write("probed\n")
emit(type="result", status="done", summary="Probed.")
