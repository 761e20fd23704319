"""Two instances behind one address, for a turn re-attached through Redis: a proxy that
sends a client's first connection to the instance running the turn (and cuts it when told)
and every later one to the other instance, and a hold on the other instance's re-attaches
(the first is answered, the next ones wait) so a test acts between two attempts; the same
hold on the events stream, and a hold on its first open (a client's start-up loads done,
its stream not yet open)."""

from __future__ import annotations

import asyncio
import contextlib

from aiohttp import web

from tests.fakes.service_middleware import Handler, ServiceMiddleware


class SwitchingProxy:
    """A loopback TCP proxy: connection 1 to `first_port` until `cut` is set (a network
    drop mid-turn), every later connection to `then_port` (a load balancer moving on)."""

    def __init__(self, first_port: int, then_port: int) -> None:
        self.first_port = first_port
        self.then_port = then_port
        self.cut = asyncio.Event()
        self.connections = 0
        self.server: asyncio.Server | None = None

    async def start(self) -> str:
        self.server = await asyncio.start_server(self._handle, "127.0.0.1", 0)
        return f"http://127.0.0.1:{self.server.sockets[0].getsockname()[1]}"

    async def close(self) -> None:
        if self.server is not None:
            self.server.close()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self.server.wait_closed(), 10)

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.connections += 1
        first = self.connections == 1
        port = self.first_port if first else self.then_port
        up_reader, up_writer = await asyncio.open_connection("127.0.0.1", port)

        async def pipe(src: asyncio.StreamReader, dst: asyncio.StreamWriter) -> None:
            try:
                while chunk := await src.read(65536):
                    dst.write(chunk)
                    await dst.drain()
            except ConnectionError:
                pass
            finally:
                dst.close()

        pipes = asyncio.gather(pipe(reader, up_writer), pipe(up_reader, writer))
        if not first:
            await pipes
            return
        cut = asyncio.create_task(self.cut.wait())
        await asyncio.wait({pipes, cut}, return_when=asyncio.FIRST_COMPLETED)
        cut.cancel()
        writer.close()
        up_writer.close()
        pipes.cancel()
        with contextlib.suppress(asyncio.CancelledError, ConnectionError):
            await pipes


class HeldRepeat(ServiceMiddleware):
    """The real service, its GETs of `path` (a turn's re-attach, the events stream)
    observed: the first is answered as the service answers it (its status in `answered`,
    then `first_done` is set), the next ones wait for `release`; each one's Last-Event-ID
    (None without) is in `last_event_ids`. Pass `plugins()` to `api_factory`."""

    def __init__(self, path: str) -> None:
        self.path = path
        self.answered: list[int] = []
        self.last_event_ids: list[str | None] = []
        self.first_done = asyncio.Event()
        self.asked_again = asyncio.Event()
        self.release = asyncio.Event()

    async def around(self, request: web.Request, handler: Handler) -> web.StreamResponse:
        if request.method != "GET" or request.path != self.path:
            response: web.StreamResponse = await handler(request)
            return response
        self.last_event_ids.append(request.headers.get("Last-Event-ID"))
        if len(self.last_event_ids) > 1:
            self.asked_again.set()
            await self.release.wait()
            return await handler(request)
        try:
            response = await handler(request)
        except web.HTTPException as exc:
            self.answered.append(exc.status)
            raise
        except Exception as exc:  # the service's own errors, answered by its middleware
            self.answered.append(int(getattr(exc, "status", 500)))
            raise
        else:
            self.answered.append(response.status)
        finally:
            self.first_done.set()
        return response


class HeldOpen(ServiceMiddleware):
    """The real service, its first GET of `path` (a client opening the events stream) held
    until `release` is set (`asked` is set when it comes); later ones pass. Pass
    `plugins()` to `api_factory`."""

    def __init__(self, path: str) -> None:
        self.path = path
        self.asked = asyncio.Event()
        self.release = asyncio.Event()

    async def around(self, request: web.Request, handler: Handler) -> web.StreamResponse:
        if request.method == "GET" and request.path == self.path and not self.asked.is_set():
            self.asked.set()
            await self.release.wait()
        response: web.StreamResponse = await handler(request)
        return response
