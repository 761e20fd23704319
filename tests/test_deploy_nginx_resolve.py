"""deploy/nginx.conf follows a recreated serve container to its new address, with the real
nginx (Debian's 1.22): it once resolved `serve-1`/`serve-2` when it started and answered 502
until restarted. Here a small DNS server stands in for Docker's (127.0.0.11): it answers
`serve`, the alias both instances share in compose.yaml, with two loopback addresses, and a
"recreated" instance comes back at a third."""

from __future__ import annotations

import os
import socket
import struct
import subprocess
import threading
import time
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
import yaml

from tests.fakes.patience import PATIENCE_SECONDS
from tests.fakes.tools import require_tool

ROOT = Path(__file__).resolve().parent.parent
MAIN_CONF = """
worker_processes 1;
daemon off;
pid {prefix}/nginx.pid;
error_log stderr error;
{user}
events {{ worker_connections 64; }}
http {{
    access_log off;
    client_body_temp_path {prefix}/body;
    proxy_temp_path {prefix}/proxy;
    include {prefix}/steelframe.conf;
}}
"""


class Names:
    """A DNS server for A questions only: each name's addresses, changed as the test goes."""

    def __init__(self) -> None:
        self.addresses: dict[str, list[str]] = {}
        self.socket = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        self.socket.bind(("127.0.0.1", 0))
        self.port = self.socket.getsockname()[1]
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self) -> None:
        while True:
            try:
                query, sender = self.socket.recvfrom(512)
            except OSError:
                return  # closed
            self.socket.sendto(self._answer(query), sender)

    def _answer(self, query: bytes) -> bytes:
        # RFC 1035 4.1: the header, one question (labels, type, class), then the answers.
        end = 12
        labels = []
        while query[end]:
            labels.append(query[end + 1 : end + 1 + query[end]].decode())
            end += 1 + query[end]
        end += 5  # the root label, QTYPE and QCLASS
        qtype = struct.unpack("!H", query[end - 4 : end - 2])[0]
        found = self.addresses.get(".".join(labels).lower(), []) if qtype == 1 else []
        rcode = 0 if ".".join(labels).lower() in self.addresses else 3  # NXDOMAIN
        header = struct.pack(
            "!HHHHHH", struct.unpack("!H", query[:2])[0], 0x8180 | rcode, 1, len(found), 0, 0
        )
        answers = b"".join(
            struct.pack("!HHHIH", 0xC00C, 1, 1, 1, 4) + socket.inet_aton(a) for a in found
        )
        return header + query[12:end] + answers

    def close(self) -> None:
        self.socket.close()


class Instance:
    """An HTTP server standing in for one serve instance: it answers with its address."""

    def __init__(self, address: str, port: int) -> None:
        class Handler(BaseHTTPRequestHandler):
            def _answer(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                self.rfile.read(length)
                body = address.encode()
                self.send_response(200)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            do_GET = do_POST = _answer

            def log_message(self, *args: object) -> None:
                pass

        self.server = ThreadingHTTPServer((address, port), Handler)
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


def _free_port(address: str) -> int:
    with socket.socket() as probe:
        probe.bind((address, 0))
        return int(probe.getsockname()[1])


@contextmanager
def _nginx(tmp_path: Path, names: Names, backend_port: int) -> Iterator[int]:
    """deploy/nginx.conf as compose mounts it, with this test's DNS server, ports and a 1 s
    answer life (10 s in the file) in place of Docker's."""
    conf = (ROOT / "deploy/nginx.conf").read_text()
    port = _free_port("127.0.0.1")
    for old, new in (
        ("resolver 127.0.0.11 valid=10s", f"resolver 127.0.0.1:{names.port} valid=1s"),
        ("listen 80;", f"listen 127.0.0.1:{port};"),
        ("serve:8080", f"serve:{backend_port}"),
    ):
        conf = conf.replace(old, new)
    (tmp_path / "steelframe.conf").write_text(conf)
    user = "user root;" if os.geteuid() == 0 else ""  # its temp folders are ours
    (tmp_path / "nginx.conf").write_text(MAIN_CONF.format(prefix=tmp_path, user=user))
    command = [require_tool("nginx", "nginx-light"), "-p", str(tmp_path), "-c", "nginx.conf"]
    log = tmp_path / "error.log"
    with log.open("w") as errors:
        process = subprocess.Popen(command, stderr=errors)
    try:
        deadline = time.monotonic() + PATIENCE_SECONDS
        while True:
            if process.poll() is not None:
                pytest.fail(f"nginx did not start: {log.read_text()}")
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                assert time.monotonic() < deadline, "nginx never listened"
                time.sleep(0.02)
        yield port
    finally:
        process.terminate()
        process.wait(PATIENCE_SECONDS)


def _answered_by(port: int, path: str = "/api/operator/board", body: bytes | None = None) -> str:
    request = urllib.request.Request(f"http://127.0.0.1:{port}{path}", data=body)
    with urllib.request.urlopen(request, timeout=PATIENCE_SECONDS) as response:
        assert response.status == 200
        return str(response.read().decode())


def _until_answered_by(port: int, address: str) -> set[str]:
    """Requests until `address` answers one; every one is answered (200) on the way."""
    seen: set[str] = set()
    deadline = time.monotonic() + PATIENCE_SECONDS
    while True:
        seen.add(_answered_by(port))
        if address in seen:
            return seen
        assert time.monotonic() < deadline, f"{address} never answered; answered: {seen}"
        time.sleep(0.02)  # nginx asks the DNS again once its answer is 1 s old


def test_the_proxy_follows_a_recreated_instance_and_spreads_over_both(tmp_path: Path) -> None:
    aliases = {
        name: service.get("networks", {}).get("default", {}).get("aliases", [])
        for name, service in yaml.safe_load((ROOT / "compose.yaml").read_text())["services"].items()
    }
    assert "serve" in aliases["serve-1"] and "serve" in aliases["serve-2"], aliases
    names = Names()
    backend_port = _free_port("127.0.0.2")
    first, second = Instance("127.0.0.2", backend_port), Instance("127.0.0.3", backend_port)
    names.addresses["serve"] = ["127.0.0.2", "127.0.0.3"]
    recreated = None
    try:
        with _nginx(tmp_path, names, backend_port) as port:
            # Both instances take requests.
            assert {"127.0.0.2", "127.0.0.3"} <= _until_answered_by(port, "127.0.0.3")
            assert _until_answered_by(port, "127.0.0.2")
            # serve-2 is recreated at another address: no request fails meanwhile (the old
            # address refuses, the other instance answers), and it is found there.
            second.close()
            recreated = Instance("127.0.0.4", backend_port)
            names.addresses["serve"] = ["127.0.0.2", "127.0.0.4"]
            assert "127.0.0.3" not in _until_answered_by(port, "127.0.0.4")
            # Webhook deliveries (their own location) reach the instances the same way.
            delivery = _answered_by(port, "/api/github/webhooks", body=b"{}")
            assert delivery in {"127.0.0.2", "127.0.0.4"}
    finally:
        for instance in (first, second, recreated):
            if instance is not None and instance is not second:
                instance.close()
        names.close()


def test_streams_are_not_buffered_and_webhooks_have_their_own_route() -> None:
    """What the upstream blocks' test checked, for the file without them: chat and events
    streams unbuffered with long reads, 26 MB bodies, webhooks on HTTP/1.1 to `serve`."""
    conf = "\n".join(
        line.split("#")[0] for line in (ROOT / "deploy/nginx.conf").read_text().splitlines()
    )
    assert "upstream " not in conf  # an upstream block's names are resolved once, at start
    everything = conf[conf.index("location / {") :]
    everything = everything[: everything.index("}")]
    assert "proxy_buffering off;" in everything and "proxy_read_timeout 3600s;" in everything
    assert "client_max_body_size 26m;" in conf
    webhooks = conf[conf.index("location = /api/github/webhooks") :]
    webhooks = webhooks[: webhooks.index("}")]
    assert "proxy_pass http://$serve;" in webhooks and "proxy_http_version 1.1;" in webhooks
