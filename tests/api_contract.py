"""Every answer the test suite gets from the service, checked against the app's own OpenAPI
document: the status must be one the operation documents, a JSON body must match its
schema, and each frame of an event stream must match the stream's schema.

`checked_response_class(check)` is the hook: the test client's sessions use it as their
response class (tests/conftest.py, `api_factory`), so no test can read an answer the check
did not see. A mismatch raises where the test reads the answer and is listed again at the
fixture's teardown (in case a test swallowed the error).
"""

from __future__ import annotations

import copy
import hashlib
import json
import marshal
import re
from collections.abc import AsyncIterator, Callable
from typing import Any

import jsonschema_rs
from aiohttp import ClientResponse
from jsonschema import Draft202012Validator

from github_sandbox.contract import CompiledSchema
from tui_client.sse import SseError, SseReader

# What the router itself answers for a path no operation has: JSON errors (the middleware).
ROUTER_STATUSES = frozenset({404, 405})


class ApiContract:
    def __init__(self, document: dict[str, Any]) -> None:
        self.document = document
        self.problems: list[str] = []
        # Where the app under test answers (its own address, and proxies in front of it);
        # answers from elsewhere (the GitHub sandbox, reached through the same client
        # session) are not this document's.
        self.origins: set[Any] = set()
        # Streams whose last event may still wait for the blank line that ends it (a test
        # stops reading at the frame it wanted): `flush` checks those frames too.
        self._open_streams: list[Callable[[], None]] = []

    def _template(self, path: str) -> str | None:
        for template in self.document["paths"]:
            if re.fullmatch(re.sub(r"\{[^}/]+\}", "[^/]+", template), path):
                return template
        return None

    def flush(self) -> None:
        streams, self._open_streams = self._open_streams, []
        for finish in streams:
            finish()

    def _schema_problems(self, schema: dict[str, Any], instance: Any) -> list[str]:
        components = self.document["components"]
        # Tests may change the document (tests/test_api_contract.py): a schema is compiled
        # for the components as they are now, and found again only while they stay so.
        key = (_digest(components), _digest(schema))
        compiled = _COMPILED.get(key)
        if compiled is None:
            compiled = _COMPILED[key] = _compile(schema, components)
        return compiled.problems(instance)

    def content_schema(
        self, method: str, path: str, status: int, media_type: str
    ) -> tuple[dict[str, Any] | None, list[str]]:
        """The schema documented for this answer, or why there is none to match."""
        where = f"{method} {path} -> {status}"
        template = self._template(path)
        operation = (
            None if template is None else self.document["paths"][template].get(method.lower())
        )
        if operation is None:
            if status in ROUTER_STATUSES:
                return {"$ref": "#/components/schemas/Error"}, []
            return None, [f"{where}: no operation in the document"]
        answer = operation["responses"].get(str(status))
        if answer is None:
            return None, [f"{where}: status {status} is not documented"]
        content = answer.get("content", {})
        if not content:
            return {}, []
        if media_type not in content:
            return None, [f"{where}: {media_type} is not a documented body ({', '.join(content)})"]
        return content[media_type].get("schema", {}), []

    def check_body(self, method: str, path: str, status: int, media_type: str, raw: bytes) -> None:
        schema, problems = self.content_schema(method, path, status, media_type)
        if schema is not None and media_type == "application/json":
            try:
                body = json.loads(raw) if raw else None
            except ValueError:
                body = raw.decode(errors="replace")[:80]
                problems.append(f"{method} {path} -> {status}: body is not JSON: {body!r}")
            else:
                problems += [
                    f"{method} {path} -> {status}: {p}" for p in self._schema_problems(schema, body)
                ]
        self.report(problems)

    def check_frame(self, method: str, path: str, status: int, frame: dict[str, Any]) -> None:
        schema, problems = self.content_schema(method, path, status, "text/event-stream")
        if schema is not None:
            problems += [
                f"{method} {path} frame {frame.get('type')}: {p}"
                for p in self._schema_problems(schema, frame)
            ]
        self.report(problems)

    def report(self, problems: list[str]) -> None:
        if problems:
            self.problems += problems
            raise AssertionError("answer breaks the OpenAPI document:\n" + "\n".join(problems))


def _digest(value: Any) -> bytes:
    """The same for equal JSON values built in the same order (marshal keeps the types:
    1, 1.0 and true differ)."""
    return hashlib.blake2b(marshal.dumps(value), digest_size=16).digest()


# Every schema checked in this process, by the state of the components and the schema
# itself: each test builds its own app and ApiContract from an equal document, so all but
# the first find their schemas compiled.
_COMPILED: dict[tuple[bytes, bytes], CompiledSchema] = {}


def _compile(schema: dict[str, Any], components: dict[str, Any]) -> CompiledSchema:
    # A copy: a test that changes the document later must not change what this one checks.
    root = copy.deepcopy({"allOf": [schema], "components": components})
    return CompiledSchema(
        jsonschema_rs.Draft202012Validator(root, validate_formats=False, offline=True),
        lambda: Draft202012Validator(root),
    )


class _CheckedStream:
    """A response's body stream that shows every byte read through it to `seen`."""

    def __init__(self, inner: Any, seen: Callable[[bytes], None]) -> None:
        self._inner = inner
        self._seen = seen

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)

    async def readline(self) -> bytes:
        data: bytes = await self._inner.readline()
        self._seen(data)
        return data

    async def read(self, n: int = -1) -> bytes:
        data: bytes = await self._inner.read(n)
        self._seen(data)
        return data

    async def readany(self) -> bytes:
        data: bytes = await self._inner.readany()
        self._seen(data)
        return data

    async def readchunk(self) -> tuple[bytes, bool]:
        data, end = await self._inner.readchunk()
        self._seen(data)
        return data, end

    async def _through(self, source: AsyncIterator[bytes]) -> AsyncIterator[bytes]:
        async for data in source:
            self._seen(data)
            yield data

    def __aiter__(self) -> AsyncIterator[bytes]:
        return self._through(self._inner.__aiter__())

    def iter_any(self) -> AsyncIterator[bytes]:
        return self._through(self._inner.iter_any())

    def iter_chunked(self, n: int) -> AsyncIterator[bytes]:
        return self._through(self._inner.iter_chunked(n))


def checked_response_class(contract: ApiContract) -> type[ClientResponse]:
    class CheckedResponse(ClientResponse):
        async def start(self, connection: Any) -> ClientResponse:
            await super().start(connection)
            if self.url.origin() not in contract.origins:
                return self
            method, path, status = self.method, self.url.path, self.status
            media_type = self.headers.get("Content-Type", "").split(";")[0].strip()
            if media_type != "text/event-stream":
                contract.check_body(method, path, status, media_type, await self.read())
                return self
            reader = SseReader()  # the TUI's parser: the one SSE parser of the project
            line_complete = [True]

            def seen(data: bytes) -> None:
                if data:
                    line_complete[0] = data.endswith((b"\n", b"\r"))
                try:
                    frames = reader.feed(data)
                except SseError as exc:
                    contract.report([f"{method} {path}: {exc}"])
                for frame in frames:
                    contract.check_frame(method, path, status, frame)

            def finish() -> None:
                if line_complete[0]:  # a cut mid-line is no frame the server finished
                    seen(b"\n")

            contract._open_streams.append(finish)
            self.content = _CheckedStream(self.content, seen)  # type: ignore[assignment]
            return self

    return CheckedResponse
