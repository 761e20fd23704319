"""Reading a webhook body within bounds (no HTTP here).

Before a delivery is authenticated, reading it is the only cost anyone on the internet can
make us pay, so: each chunk goes through the HMAC as it arrives, into a buffer no larger
than the declared length (allocated once, never regrown), and one process-wide budget caps
the bytes of bodies being read at once. A body that does not fit is refused before it is
read (503 with Retry-After), never queued in memory.
"""

from __future__ import annotations

import functools
import hashlib
import hmac
import mmap

from bot.contracts.errors import ErrorDetail
from bot.errors import PayloadTooLarge, Unauthorized, Unavailable
from webhooks.signature import PREFIX

# Bodies in flight at once, process-wide. GitHub's deliveries are mostly a few KB to a few
# hundred KB; the budget still fits two of the largest (25 MB) beside the small ones.
DEFAULT_IN_FLIGHT_BYTES = 64 * 1024 * 1024
# Bodies larger than LARGE_BODY may not use the last RESERVED_FOR_SMALL bytes of the budget.
LARGE_BODY = 1024 * 1024
RESERVED_FOR_SMALL = 8 * 1024 * 1024
RETRY_AFTER_SECONDS = 5
MAP_AT_LEAST = 256 * 1024


class Busy(Unavailable):
    """The budget for bodies in flight is spent: come back in `retry_after` seconds."""

    code = "busy"

    def __init__(self, message: str, *, retry_after: int = RETRY_AFTER_SECONDS) -> None:
        super().__init__(message, detail=ErrorDetail(retry_after=retry_after))
        self.retry_after = retry_after


class InFlight:
    """The bytes of webhook bodies being read now, against one limit per process."""

    def __init__(
        self,
        limit: int = DEFAULT_IN_FLIGHT_BYTES,
        *,
        large: int = LARGE_BODY,
        reserve: int = RESERVED_FOR_SMALL,
    ) -> None:
        self.limit = limit
        self.large = large
        self.reserve = min(reserve, limit)
        self.used = 0

    def take(self, size: int, *, body_size: int) -> None:
        """Count `size` more bytes of a body expected to be `body_size` long, or raise Busy."""
        ceiling = self.limit - (self.reserve if body_size > self.large else 0)
        if self.used + size > ceiling:
            raise Busy("too many webhook bytes in flight; retry shortly")
        self.used += size

    def give(self, size: int) -> None:
        self.used = max(self.used - size, 0)


class SignedBody:
    """A body being read: fed chunk by chunk, hashed as it goes, counted against the
    budget, released with its bytes only when the signature matches."""

    def __init__(
        self, secret: str, *, max_body: int, expected: int | None, budget: InFlight
    ) -> None:
        self._mac = _keyed(secret).copy()
        self._max_body = max_body
        self._expected = expected
        self._budget = budget
        self.held = 0  # bytes of the budget this body holds
        if expected is not None:
            # A declared length is taken whole, so a body that cannot fit is refused
            # before a byte of it is read.
            budget.take(expected, body_size=expected)
            self.held = expected
        # Allocated on the first chunk: a body read whole (`feed_all`) needs none.
        self._buffer: bytearray | mmap.mmap | None = None
        self._whole: bytes | None = None
        self.size = 0

    def feed(self, chunk: bytes) -> None:
        end = self._within(self.size + len(chunk))
        if self._buffer is None:
            self._buffer = _buffer(self._expected or 0)
        if self._expected is None:  # chunked: take the bytes as they come
            self._budget.take(len(chunk), body_size=end)
            self.held += len(chunk)
            assert isinstance(self._buffer, bytearray)
            self._buffer += chunk
        else:
            self._buffer[self.size : end] = chunk
        self._mac.update(chunk)
        self.size = end

    def feed_all(self, data: bytes) -> None:
        """The whole of a small body, read at once: hashed and kept as it is, with no
        buffer and no copy. Only for a body of declared length, instead of `feed`."""
        if self._expected is None or self.size or self._buffer is not None:
            raise ValueError("feed_all takes the whole of a body of declared length")
        self.size = self._within(len(data))
        self._mac.update(data)
        self._whole = data

    def _within(self, end: int) -> int:
        if end > self._max_body or (self._expected is not None and end > self._expected):
            raise PayloadTooLarge(f"webhook payloads are at most {self._max_body} bytes")
        return end

    def verified(self, header: str | None) -> bytes:
        """The body, if `header` is its signature; Unauthorized otherwise."""
        if not header:
            raise Unauthorized("missing X-Hub-Signature-256 header")
        expected = (PREFIX + self._mac.hexdigest()).encode()
        if not hmac.compare_digest(header.encode(), expected):
            raise Unauthorized("X-Hub-Signature-256 does not match the body")
        if self._whole is not None:
            body = self._whole
        elif self._buffer is None:
            body = b""
        else:
            body = bytes(memoryview(self._buffer)[: self.size])  # one copy, not two
        self._drop()
        return body

    def release(self) -> None:
        self._drop()
        self._budget.give(self.held)
        self.held = 0

    # A context manager itself (`reading`): a generator-based one cost ~2% of a delivery.
    def __enter__(self) -> SignedBody:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.release()

    def _drop(self) -> None:
        if isinstance(self._buffer, mmap.mmap):
            self._buffer.close()
        self._buffer = self._whole = None


@functools.lru_cache(maxsize=4)
def _keyed(secret: str) -> hmac.HMAC:
    """An HMAC keyed with `secret` and fed nothing, never updated itself: each body starts
    from a copy of it, instead of encoding and padding the key and starting two hashes."""
    return hmac.new(secret.encode(), digestmod=hashlib.sha256)


def _buffer(size: int) -> bytearray | mmap.mmap:
    """One allocation of the declared size (growing a buffer by doubling would briefly hold
    two copies of a 25 MB body). Large ones are anonymous maps: unmapped when closed, so
    the memory goes back to the system at once instead of staying in the allocator's heap
    as resident pages."""
    if size >= MAP_AT_LEAST:
        return mmap.mmap(-1, size)
    return bytearray(size)


def reading(budget: InFlight, secret: str, *, max_body: int, expected: int | None) -> SignedBody:
    """A `SignedBody` whose bytes count against `budget` until its `with` block ends."""
    return SignedBody(secret, max_body=max_body, expected=expected, budget=budget)
