"""Browser sign-ins: an operator token is exchanged once for a session cookie.

The cookie value and its CSRF token are random; only the cookie's digest is stored, so a
database dump signs nobody in. Signing out deletes the row, so a copied cookie stops working
at once (not at expiry). The operator API accepts either a bearer token or this cookie, and
with the cookie every state-changing request must also echo the CSRF token in a header.
"""

from __future__ import annotations

import hmac
import secrets
from dataclasses import dataclass
from datetime import timedelta

from sqlalchemy import delete, select
from sqlalchemy.orm import Session

from bot.clock import Clock, utcnow
from bot.errors import Unauthorized
from bot.models import Operator, WebSession
from bot.operators import authenticate, credential_bytes, hash_token

SESSION_LIFETIME = timedelta(days=7)
COOKIE_PREFIX = "sfw_"


@dataclass(frozen=True)
class WebSignIn:
    """What the browser is handed once: the cookie value and the CSRF token."""

    cookie: str
    csrf_token: str
    operator_id: int
    operator_name: str


@dataclass(frozen=True)
class WebIdentity:
    operator_id: int
    operator_name: str
    csrf_token: str


def sign_in(session: Session, token: str, *, clock: Clock = utcnow) -> WebSignIn:
    """Exchange an operator token for a new browser session (Unauthorized if wrong)."""
    operator = authenticate(session, token)
    return start_session(session, operator.id, operator.name, clock=clock)


def start_session(
    session: Session, operator_id: int, operator_name: str, *, clock: Clock = utcnow
) -> WebSignIn:
    """A new browser session for an operator already identified (a token, a sign-in code)."""
    now = clock()
    # Sign-in is a cheap moment to forget this operator's expired sessions.
    session.execute(
        delete(WebSession).where(WebSession.operator_id == operator_id, WebSession.expires_at < now)
    )
    cookie = COOKIE_PREFIX + secrets.token_urlsafe(32)
    csrf = secrets.token_urlsafe(32)
    session.add(
        WebSession(
            token_hash=hash_token(cookie),
            operator_id=operator_id,
            csrf_token=csrf,
            created_at=now,
            expires_at=now + SESSION_LIFETIME,
        )
    )
    return WebSignIn(cookie, csrf, operator_id, operator_name)


def identify(session: Session, cookie: str, *, clock: Clock = utcnow) -> WebIdentity:
    """The operator behind a session cookie, or Unauthorized (unknown, expired, signed out)."""
    if not cookie.startswith(COOKIE_PREFIX) or len(cookie) > 200:
        raise Unauthorized("not signed in: the session cookie is not valid")
    digest = hash_token(cookie)
    row = session.execute(
        select(WebSession, Operator.name)
        .join(Operator, Operator.id == WebSession.operator_id)
        .where(WebSession.token_hash == digest)
    ).first()
    if row is None or not hmac.compare_digest(row[0].token_hash, digest):
        raise Unauthorized("not signed in: the session has ended, sign in again")
    web_session, name = row
    if web_session.expires_at <= clock():
        raise Unauthorized("not signed in: the session expired, sign in again")
    return WebIdentity(web_session.operator_id, name, web_session.csrf_token)


def sign_out(session: Session, cookie: str) -> bool:
    """End a browser session; True if there was one. Signing out twice is harmless."""
    result = session.execute(delete(WebSession).where(WebSession.token_hash == hash_token(cookie)))
    return bool(getattr(result, "rowcount", 0))


def csrf_matches(expected: str, given: str | None) -> bool:
    """Whether the header equals the session's CSRF token (any text: a header that is not
    UTF-8 is a mismatch, a 403, never an error; `credential_bytes`)."""
    return bool(given) and hmac.compare_digest(
        credential_bytes(expected), credential_bytes(given or "")
    )
