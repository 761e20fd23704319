"""A loopback TCP proxy in front of the service, which can drop a stream mid-frame."""

from __future__ import annotations

import asyncio
import socket


class LoopbackProxy:
    """A loopback TCP proxy to the service. With `cut_first`, it breaks its first connection
    in the middle of the first `thinking` frame (a proxy or network drop mid-turn). With
    `sock` (bound, not listening), it listens on that socket instead of a new port."""

    def __init__(
        self, target_port: int, *, cut_first: bool = True, sock: socket.socket | None = None
    ) -> None:
        self.target_port = target_port
        self.cut_first = cut_first
        self.sock = sock
        self.connections = 0
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
                        marker = seen.find(b'"type":"thinking"')
                        if marker >= 0:
                            dst.write(seen[: marker + 5])
                            await dst.drain()
                            return
                        continue
                    dst.write(chunk)
                    await dst.drain()
            except ConnectionError:
                pass
            finally:
                dst.close()

        await asyncio.gather(pipe(reader, up_writer, False), pipe(up_reader, writer, cut))
