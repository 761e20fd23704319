"""The in-sandbox half of a coding run's egress: started first inside the sandbox (the
worker's interpreter, `-I -S`, standard library only), it listens on the sandbox's own
loopback and relays each connection to the worker's proxy on the Unix socket bound into the
sandbox, then becomes the coding command (exec), which keeps its pid, exit status and signals.

Usage: relay.py SOCKET [FORWARD ...] -- COMMAND [ARGS ...]
(and, as the relay re-executes itself: relay.py --serve SOCKET FD[=FORWARD] ...)

* A proxy port on 127.0.0.1 (any free one): every byte goes to the worker's proxy as is.
  The command gets it as HTTPS_PROXY, HTTP_PROXY, ALL_PROXY (and the lowercase names).
* Each FORWARD (a loopback `address:port` the operator allowed explicitly, such as a local
  model server) is listened on at that same address inside: a connection there is tunnelled
  with CONNECT, so a base URL like `http://127.0.0.1:8123` works whether or not the client
  honours proxy variables. These are NO_PROXY.

The relay runs in a grandchild that the sandbox's init adopts (never the command's child,
so a shell's `wait` does not wait for it); it ends with the sandbox's pid namespace. It is
one thread (asyncio): the process limit counts threads.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import socket
import sys

# The proxy's exact answer to an accepted CONNECT (bot.lifecycle.egress_proxy.ESTABLISHED).
ESTABLISHED = b"HTTP/1.1 200 Connection established\r\n\r\n"
BACKLOG = 128


def _listener(host: str, port: int) -> socket.socket:
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind((host, port))
    sock.listen(BACKLOG)
    sock.setblocking(False)
    return sock


def _split(endpoint: str) -> tuple[str, int]:
    host, _, port = endpoint.rpartition(":")
    return host.strip("[]"), int(port)


async def _copy(src: asyncio.StreamReader, dst: asyncio.StreamWriter) -> None:
    # A peer gone first ends the copy: a reset is a ConnectionError, but `write_eof` on a
    # socket reset before its transport read the reset is ENOTCONN, a plain OSError.
    with contextlib.suppress(OSError):
        while chunk := await src.read(65536):
            dst.write(chunk)
            await dst.drain()
        if dst.can_write_eof():
            dst.write_eof()


async def _relay(
    path: str, tunnel: str | None, reader: asyncio.StreamReader, writer: asyncio.StreamWriter
) -> None:
    try:
        up_reader, up_writer = await asyncio.open_unix_connection(path)
    except OSError:
        writer.close()
        return
    try:
        if tunnel is not None:
            up_writer.write(f"CONNECT {tunnel} HTTP/1.1\r\nHost: {tunnel}\r\n\r\n".encode())
            try:
                answer = await up_reader.readexactly(len(ESTABLISHED))
            except asyncio.IncompleteReadError as short:
                answer = short.partial
            if answer != ESTABLISHED:
                writer.write(answer)  # the proxy's refusal, to the client as it is
        await asyncio.gather(_copy(reader, up_writer), _copy(up_reader, writer))
    finally:
        up_writer.close()
        writer.close()


async def _serve(path: str, listeners: list[tuple[socket.socket, str | None]]) -> None:
    for sock, tunnel in listeners:

        async def handle(
            reader: asyncio.StreamReader, writer: asyncio.StreamWriter, tunnel: str | None = tunnel
        ) -> None:
            await _relay(path, tunnel, reader, writer)

        await asyncio.start_server(handle, sock=sock)
    await asyncio.Event().wait()


def serve(argv: list[str]) -> None:
    """`--serve SOCKET FD[=FORWARD] ...`: relay on the listening descriptors inherited."""
    path, specs = argv[0], argv[1:]
    listeners = []
    for spec in specs:
        fd, _, tunnel = spec.partition("=")
        listeners.append((socket.socket(fileno=int(fd)), tunnel or None))
    asyncio.run(_serve(path, listeners))


def _detach(path: str, listeners: list[tuple[socket.socket, str | None]]) -> None:
    """Start the relay in a grandchild (the sandbox's init adopts it) that re-executes this
    script with only the listening descriptors: its command line names no coding command."""
    child = os.fork()
    if child:
        os.waitpid(child, 0)
        return
    try:
        if os.fork() == 0:
            os.setsid()
            devnull = os.open(os.devnull, os.O_RDWR)
            os.dup2(devnull, 0)
            os.dup2(devnull, 1)
            specs = []
            for sock, tunnel in listeners:
                sock.set_inheritable(True)
                specs.append(f"{sock.fileno()}={tunnel}" if tunnel else str(sock.fileno()))
            argv = [sys.executable, "-I", "-S", os.path.abspath(__file__), "--serve", path]
            os.execv(sys.executable, [*argv, *specs])
    finally:
        os._exit(0)


def launch(argv: list[str]) -> None:
    """`SOCKET [FORWARD ...] -- COMMAND ...`: listen, start the relay, become COMMAND."""
    split = argv.index("--")
    path, forwards, command = argv[0], argv[1:split], argv[split + 1 :]
    listeners: list[tuple[socket.socket, str | None]] = []
    for forward in forwards:
        try:
            listeners.append((_listener(*_split(forward)), forward))
        except OSError as exc:  # a port below 1024 as nobody: reached through the proxy only
            print(f"steelframe relay: not listening on {forward}: {exc}", file=sys.stderr)
    forwards = [forward for _, forward in listeners if forward]
    proxy = _listener("127.0.0.1", 0)
    listeners.append((proxy, None))
    url = f"http://127.0.0.1:{proxy.getsockname()[1]}"
    _detach(path, listeners)
    for sock, _ in listeners:
        sock.close()
    env = dict(os.environ)
    for name in ("HTTPS_PROXY", "HTTP_PROXY", "ALL_PROXY"):
        env[name] = env[name.lower()] = url
    env["NO_PROXY"] = env["no_proxy"] = ",".join(forwards)
    os.execvpe(command[0], command, env)


if __name__ == "__main__":
    if sys.argv[1:2] == ["--serve"]:
        serve(sys.argv[2:])
    else:
        launch(sys.argv[1:])
