"""Operators and their bearer tokens: created by the CLI, checked on every API request."""

from __future__ import annotations

import hashlib
import hmac
import secrets
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import bindparam, delete, select
from sqlalchemy.orm import Session

from bot.clock import Clock, utcnow
from bot.errors import BadRequest, Conflict, Unauthorized
from bot.models import Operator, WebSession

TOKEN_PREFIX = "sfo_"


def credential_bytes(credential: str) -> bytes:
    """A credential as bytes, for any text a client sends. aiohttp decodes header bytes that
    are not UTF-8 into lone surrogates (surrogateescape), which a plain `.encode()` refuses:
    a `Bearer \\xff` was an unauthenticated 500. `surrogatepass` encodes every string, is
    the same as `.encode()` for valid text (stored digests keep matching), and the bytes it
    gives for a surrogate match no token (ours are ASCII): a wrong credential, a 401."""
    return credential.encode("utf-8", "surrogatepass")


def hash_token(token: str) -> str:
    return hashlib.sha256(credential_bytes(token)).hexdigest()


def create_operator(session: Session, name: str, *, clock: Clock = utcnow) -> tuple[Operator, str]:
    """A new operator and its token; the token is returned once and stored only hashed."""
    name = name.strip()
    if not name or len(name) > 100:
        raise BadRequest("operator name must be 1 to 100 characters")
    if session.scalar(select(Operator).where(Operator.name == name)) is not None:
        raise Conflict(f"operator {name!r} already exists")
    token = TOKEN_PREFIX + secrets.token_urlsafe(32)
    operator = Operator(name=name, token_hash=hash_token(token), created_at=clock())
    session.add(operator)
    session.flush()
    return operator, token


def rotate_token(session: Session, name: str) -> str:
    operator = session.scalar(select(Operator).where(Operator.name == name))
    if operator is None:
        raise BadRequest(f"no operator named {name!r}")
    token = TOKEN_PREFIX + secrets.token_urlsafe(32)
    operator.token_hash = hash_token(token)
    operator.revoked_at = None
    return token


@dataclass(frozen=True)
class ListedOperator:
    """An operator as `operator list` shows it (never a token)."""

    name: str
    created_at: datetime
    revoked_at: datetime | None  # None: its token works


def list_operators(session: Session) -> list[ListedOperator]:
    """Every operator, oldest first."""
    rows = session.execute(
        select(Operator.name, Operator.created_at, Operator.revoked_at).order_by(Operator.id)
    )
    return [ListedOperator(name, created, revoked) for name, created, revoked in rows]


def revoke_token(session: Session, name: str) -> None:
    """The operator's token stops working and its browser sign-ins end; the operator and
    its sessions stay (`rotate` gives it a new token)."""
    operator = session.scalar(select(Operator).where(Operator.name == name))
    if operator is None:
        raise BadRequest(f"no operator named {name!r}")
    operator.token_hash = hash_token(secrets.token_urlsafe(32))  # never shown: nothing opens
    operator.revoked_at = utcnow()
    session.execute(delete(WebSession).where(WebSession.operator_id == operator.id))


@dataclass(frozen=True)
class Identity:
    """Who a token belongs to."""

    id: int
    name: str


# Built once: every API request with a token not yet cached runs one, on the path to its
# first byte. A Core SELECT on the session's connection costs a fifth of an ORM load.
_BY_DIGEST = select(Operator.id, Operator.name, Operator.token_hash).where(
    Operator.token_hash == bindparam("digest")
)
_BY_DIGESTS = select(Operator.id, Operator.name, Operator.token_hash).where(
    Operator.token_hash.in_(bindparam("digests", expanding=True))
)


def authenticate(session: Session, token: str) -> Identity:
    """The operator whose token this is, or Unauthorized. Lookup by hash is constant-time
    with respect to the token's content (the index compares digests, never the secret)."""
    if not token:
        raise Unauthorized("missing bearer token")
    digest = hash_token(token)
    row = session.connection().execute(_BY_DIGEST, {"digest": digest}).first()
    if row is None or not hmac.compare_digest(row.token_hash, digest):
        raise Unauthorized("invalid bearer token")
    return Identity(row.id, row.name)


def identities(session: Session, digests: Sequence[str]) -> dict[str, Identity]:
    """The operators whose token digests these are (`hash_token`), by digest: one statement
    for a batch of requests (bot.group_read); a digest nobody holds is left out."""
    rows = session.connection().execute(_BY_DIGESTS, {"digests": list(digests)})
    return {row.token_hash: Identity(row.id, row.name) for row in rows}
