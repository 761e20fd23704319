"""A loopback TCP proxy in front of the service, which can break its first answer (mid-frame,
or before any byte of it), and a TUI client of the service behind one."""

from __future__ import annotations

import asyncio
import socket
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from tests.conftest import ApiClient
    from tui_client.api import OperatorClient

MID_FRAME = b'"type":"thinking"'  # the first answer is broken 5 bytes into this


class LoopbackProxy:
    """A loopback TCP proxy to the service. With `cut_first`, it breaks its first connection
    in the middle of the first `thinking` frame (a proxy or network drop mid-turn); with
    `lose_first`, before any byte of its answer (the service took the request; the client
    never hears back). `cut` is set once the first answer was broken. With `sock` (bound,
    not listening), it listens on that socket instead of a new port."""

    def __init__(
        self,
        target_port: int,
        *,
        cut_first: bool = True,
        lose_first: bool = False,
        sock: socket.socket | None = None,
    ) -> None:
        self.target_port = target_port
        self.cut_first = cut_first or lose_first
        self.keep = 0 if lose_first else None  # bytes of the first answer passed on
        self.sock = sock
        self.connections = 0
        self.cut = asyncio.Event()
        self.server: asyncio.Server | None = None

    async def start(self) -> str:
        if self.sock is not None:
            self.server = await asyncio.start_server(self._handle, sock=self.sock)
        else:
            self.server = await asyncio.start_server(self._handle, "127.0.0.1", 0)
        return f"http://127.0.0.1:{self.server.sockets[0].getsockname()[1]}"

    async def close(self) -> None:
        if self.server is not None:
            self.server.close()
            await self.server.wait_closed()

    def _cut_at(self, seen: bytes) -> int | None:
        """How much of the first answer, `seen` so far, goes through before it breaks
        (None: not yet)."""
        if self.keep is not None:
            return self.keep
        marker = seen.find(MID_FRAME)
        return marker + 5 if marker >= 0 else None

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.connections += 1
        cut = self.cut_first and self.connections == 1
        up_reader, up_writer = await asyncio.open_connection("127.0.0.1", self.target_port)

        async def pipe(src: asyncio.StreamReader, dst: asyncio.StreamWriter, cutting: bool) -> None:
            seen = b""
            try:
                while chunk := await src.read(65536):
                    if cutting:
                        seen += chunk
                        at = self._cut_at(seen)
                        if at is None:
                            continue
                        if at:
                            dst.write(seen[:at])
                            await dst.drain()
                        self.cut.set()
                        up_writer.close()
                        return
                    dst.write(chunk)
                    await dst.drain()
            except ConnectionError:
                pass
            finally:
                dst.close()

        await asyncio.gather(pipe(reader, up_writer, False), pipe(up_reader, writer, cut))


@asynccontextmanager
async def behind_proxy(
    api: ApiClient, *, cut_first: bool = True, lose_first: bool = False
) -> AsyncIterator[tuple[OperatorClient, LoopbackProxy]]:
    """The TUI's client of `api`, reaching it through a `LoopbackProxy`; both closed after."""
    proxy = LoopbackProxy(api.raw.port, cut_first=cut_first, lose_first=lose_first)
    client = api.operator_client(url=await proxy.start())
    try:
        yield client, proxy
    finally:
        await client.close()
        await proxy.close()
