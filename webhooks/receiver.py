"""Receiving one delivery (no HTTP here): refuse early, read within bounds, verify, parse,
check what handlers need, store.

Order matters: what the headers alone can refuse is refused before the body is read; the
body counts against the budget of bytes in flight while it is read (`webhooks.body`); the
signature is checked before anything is stored (a forged delivery leaves no trace), the row
is committed before the answer (an acknowledged delivery is durable), and processing
happens after the answer.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from datetime import datetime
from enum import StrEnum
from typing import Any
from urllib.parse import parse_qs

import orjson
from gidgethub.routing import Router
from gidgethub.sansio import Event

from bot.clock import Clock
from bot.contracts.errors import ErrorDetail
from bot.errors import BadRequest, PayloadTooLarge, Unauthorized, Unavailable
from webhooks.body import InFlight, SignedBody, reading
from webhooks.content_keys import content_key
from webhooks.deliveries import MAX_DELIVERY_ID, MAX_EVENT, DeliveryStatus, NewDelivery
from webhooks.fields import FieldReader, Fields
from webhooks.processor import DeliveryProcessor
from webhooks.routing import lookup, missing_needs
from webhooks.signature import PREFIX
from webhooks.writer import DeliveryWriter, Stored

# A payload's value by dotted path (`routing.lookup` on a parsed one, `fields.Fields.get`).
Getter = Callable[[str], Any]
_FORM = "application/x-www-form-urlencoded"


class Receipt(StrEnum):
    ACCEPTED = "accepted"
    DUPLICATE = "duplicate"
    REPLAYED = "replayed"  # an earlier delivery's content under a new id: stored, no effect


@dataclass
class Receiver:
    secret: str | None
    router: Router
    writer: DeliveryWriter
    processor: DeliveryProcessor
    clock: Clock
    max_body: int
    budget: InFlight = field(default_factory=InFlight)
    fields: FieldReader = field(init=False)

    def __post_init__(self) -> None:
        self.fields = FieldReader(self.router)

    def check_size(self, content_length: int | None) -> None:
        if content_length is not None and content_length > self.max_body:
            raise PayloadTooLarge(f"webhook payloads are at most {self.max_body} bytes")

    def precheck(self, headers: Mapping[str, str], content_length: int | None) -> str:
        """What can be refused before reading a byte of the body: no secret (503), too
        large (413), no or malformed signature header (401), missing GitHub headers (400).
        Returns the secret to verify with."""
        if self.secret is None:
            raise Unavailable("WEBHOOK_SECRET is not configured; deliveries cannot be verified")
        self.check_size(content_length)
        header = headers.get("x-hub-signature-256")
        if not header:
            raise Unauthorized("missing X-Hub-Signature-256 header")
        if not header.startswith(PREFIX):
            raise Unauthorized("X-Hub-Signature-256 must start with sha256=")
        _event_and_id(headers)
        return self.secret

    def reading(self, secret: str, content_length: int | None) -> SignedBody:
        """A body to feed while reading the request, counted against the budget of bytes in
        flight until the block ends (Busy when the budget is spent)."""
        return reading(self.budget, secret, max_body=self.max_body, expected=content_length)

    async def accept(self, headers: Mapping[str, str], body: bytes) -> tuple[Receipt, str]:
        """Store a delivery whose signature was verified; a 400 is stored as rejected with
        the reason."""
        event_name, delivery_id = _event_and_id(headers)
        content_type = headers.get("content-type", "")
        read = None if content_type.startswith(_FORM) else _read_json(self, event_name, body)
        if read is not None:
            text, (fields, missing) = read
            get: Getter = fields.get
        else:  # a form, or a payload only a full parse answers for (`webhooks.fields`)
            text, get, missing = await self._parse_in_full(
                event_name, delivery_id, content_type, body
            )
        if missing:
            reason = f"payload lacks {', '.join(missing)}"
            await self._reject(delivery_id, event_name, get, text, reason)
            raise BadRequest(reason, detail=ErrorDetail(missing=missing))
        delivery = _new_delivery(delivery_id, event_name, get, text, self.clock())
        key = content_key(event_name, delivery.action, get, body)
        stored = await self._store(replace(delivery, content_key=key))
        if stored is Stored.DUPLICATE:
            return Receipt.DUPLICATE, delivery_id
        if stored is Stored.REPLAYED:
            return Receipt.REPLAYED, delivery_id
        # The text, not a payload: the queue may be long, and parsing again costs less than
        # the garbage collector walking every queued payload (see `submit_stored`).
        self.processor.submit_stored(delivery_id, event_name, text)
        return Receipt.ACCEPTED, delivery_id

    async def _parse_in_full(
        self, event_name: str, delivery_id: str, content_type: str, body: bytes
    ) -> tuple[str, Getter, list[str]]:
        """The stored text, the payload's values and what it lacks, from a full parse; a
        payload that is not a JSON object is stored as rejected and answered 400."""
        text = _text(body)
        try:
            data = _parse(content_type, body)
        except ValueError as exc:
            reason = f"malformed payload: {exc}"
            await self._reject(delivery_id, event_name, _nothing, text, reason)
            raise BadRequest(
                "the payload is not a JSON object", detail=ErrorDetail(reason=str(exc))
            ) from exc
        missing = missing_needs(self.router, Event(data, event=event_name, delivery_id=delivery_id))
        return text, functools.partial(lookup, data), missing

    async def _store(self, delivery: NewDelivery) -> Stored:
        try:
            return await self.writer.store(delivery)
        except Exception as exc:
            raise Unavailable("the delivery could not be stored; redeliver it later") from exc

    async def _reject(
        self, delivery_id: str, event: str, get: Getter, text: str, reason: str
    ) -> None:
        delivery = _new_delivery(delivery_id, event, get, text, self.clock())
        await self._store(replace(delivery, status=DeliveryStatus.REJECTED, reason=reason))


def _event_and_id(headers: Mapping[str, str]) -> tuple[str, str]:
    event_name = headers.get("x-github-event", "").strip()
    delivery_id = headers.get("x-github-delivery", "").strip()
    if not _token(event_name) or len(event_name) > MAX_EVENT:
        raise BadRequest("X-GitHub-Event header is missing, too long or not printable ASCII")
    if not _token(delivery_id) or len(delivery_id) > MAX_DELIVERY_ID:
        raise BadRequest("X-GitHub-Delivery header is missing, too long or not printable ASCII")
    return event_name, delivery_id


def _read_json(
    receiver: Receiver, event: str, body: bytes
) -> tuple[str, tuple[Fields, list[str]]] | None:
    """The stored text and what intake reads of a JSON body, without parsing it in full;
    None if only the full parse can answer (not UTF-8, or see `webhooks.fields`)."""
    try:
        text = body.decode("utf-8")
    except UnicodeDecodeError:
        return None  # not JSON to orjson either: the full parse words the 400
    read = receiver.fields.read(event, body)
    if read is None:
        return None
    # NUL is not storable text on PostgreSQL; GitHub's JSON never carries a raw one.
    return (text.replace("\x00", "\ufffd") if "\x00" in text else text), read


def _text(body: bytes) -> str:
    """The body as stored: text without NUL (PostgreSQL refuses it), invalid UTF-8 replaced."""
    return body.decode("utf-8", errors="replace").replace("\x00", "\ufffd")


def _nothing(path: str) -> None:
    return None


def _parse(content_type: str, body: bytes) -> dict[str, Any]:
    raw: str | bytes = body
    if content_type.startswith(_FORM):
        # Repository hooks can be configured to send the JSON as a form field.
        raw = parse_qs(body.decode("utf-8", errors="replace")).get("payload", [""])[0]
    try:
        data = orjson.loads(raw)
    except orjson.JSONDecodeError as exc:
        raise ValueError(f"not JSON ({exc})") from exc
    if not isinstance(data, dict):
        raise ValueError(f"JSON {type(data).__name__}, not an object")
    return data


def _token(value: str) -> bool:
    """A header value we store and log: GitHub's are short printable ASCII."""
    return bool(value) and value.isascii() and value.isprintable()


def _storable(value: Any) -> str | None:
    """A payload string for a column: text without NUL (PostgreSQL refuses it)."""
    return value.replace("\x00", "\ufffd") if isinstance(value, str) else None


def _new_delivery(
    delivery_id: str, event: str, get: Getter, text: str, now: datetime
) -> NewDelivery:
    """The delivery log's row; `get` gives a payload's value by dotted path."""
    action = _storable(get("action"))
    installation = get("installation.id")
    repo = _storable(get("repository.full_name"))
    return NewDelivery(
        delivery_id=delivery_id,
        event=event,
        action=action[:MAX_EVENT] if action is not None else None,
        # A bool is an int to Python, and a column of 64 bits holds no bigger id.
        installation_id=installation
        if isinstance(installation, int)
        and not isinstance(installation, bool)
        and 0 < installation < 2**63
        else None,
        repo=repo[:200] if repo is not None else None,
        body=text,
        received_at=now,
    )
