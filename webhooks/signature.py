"""`X-Hub-Signature-256`: HMAC-SHA256 of the raw body keyed with the webhook secret.

GitHub docs, "Validating webhook deliveries": the header is `sha256=` + hex digest; compare
in constant time. The legacy SHA-1 header is not accepted.
"""

from __future__ import annotations

import hashlib
import hmac

from bot.errors import Unauthorized

PREFIX = "sha256="


def signature_for(secret: str, body: bytes) -> str:
    return PREFIX + hmac.new(secret.encode(), body, hashlib.sha256).hexdigest()


def verify_signature(secret: str, body: bytes, header: str | None) -> None:
    """Raise Unauthorized unless `header` is the body's signature under `secret`."""
    if not header:
        raise Unauthorized("missing X-Hub-Signature-256 header")
    if not header.startswith(PREFIX):
        raise Unauthorized("X-Hub-Signature-256 must start with sha256=")
    if not hmac.compare_digest(header.encode(), signature_for(secret, body).encode()):
        raise Unauthorized("X-Hub-Signature-256 does not match the body")
