"""The in-sandbox relay's copying (bot/lifecycle/egress_relay.py): a peer gone first ends a
copy quietly. Before, `write_eof` on a socket whose client had reset it raised ENOTCONN (an
OSError, not the ConnectionError the copy let go), and the relay printed a traceback into
the run's private log each time a client hung up first."""

from __future__ import annotations

import asyncio
import select
import socket
import struct

from bot.lifecycle import egress_relay


async def test_a_copy_to_a_client_that_reset_its_connection_ends_without_an_error() -> None:
    accepted: asyncio.Queue[asyncio.StreamWriter] = asyncio.Queue()

    async def keep(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await accepted.put(writer)

    server = await asyncio.start_server(keep, "127.0.0.1", 0)
    client = socket.create_connection(server.sockets[0].getsockname()[:2])
    to_client = await accepted.get()
    # The relay's side has not read yet (its reader is behind, or paused by flow control)
    # when the client goes away with a reset (SO_LINGER 0), as a killed process's socket
    # does: the reset reaches the socket, not yet the transport.
    to_client.transport.pause_reading()  # type: ignore[attr-defined]
    client.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    client.close()
    peer = to_client.get_extra_info("socket")
    ready, _, _ = await asyncio.to_thread(select.select, [peer.fileno()], [], [], 30)
    assert ready, "the reset never reached the relay's side"
    upstream = asyncio.StreamReader()
    upstream.feed_eof()  # the other side is done: the copy ends with write_eof
    try:
        await egress_relay._copy(upstream, to_client)
    finally:
        to_client.close()
        server.close()
        await server.wait_closed()
