"""One-time sign-in codes: how a link signs a browser in without a token in the URL.

A link that carried the operator token itself (`/#token=...`) signed in whichever browser
opened it: anyone could send operator A a link with B's token and A's browser then worked in
B's account (login CSRF), and the long-lived token sat in the link. A code instead is minted
by someone who holds a token (`steelframe desktop`, `POST /api/operator/sign-in-codes`),
lives two minutes and is used once, in two steps:

1. claim: the page that opened the link hands in the code; it is bound to that browser (a
   random nonce, kept in an HttpOnly cookie, whose digest the code's row keeps) and the page
   learns whose account it is for. A second claim of the code fails.
2. redeem: the person confirms, on our page, signing in as that operator; the browser
   holding the nonce gets a session and the code is deleted.

Only digests are stored, so a database dump redeems nothing.
"""

from __future__ import annotations

import secrets
from dataclasses import dataclass
from datetime import datetime, timedelta

from sqlalchemy import ForeignKey, String, delete, select
from sqlalchemy.orm import Mapped, Session, mapped_column

from bot.clock import Clock, utcnow
from bot.db import Base
from bot.errors import Unauthorized
from bot.models import Operator
from bot.operators import hash_token
from bot.web_sessions import WebSignIn, start_session

CODE_LIFETIME = timedelta(minutes=2)
CODE_PREFIX = "sfc_"
MAX_CODE = 100
_GONE = "this sign-in link was already used or has expired: ask for a new one"


class SignInCode(Base):
    __tablename__ = "sign_in_codes"

    code_hash: Mapped[str] = mapped_column(String(64), primary_key=True)
    operator_id: Mapped[int] = mapped_column(ForeignKey("operators.id", ondelete="CASCADE"))
    # The digest of the nonce of the browser that claimed the code; None until claimed.
    browser_hash: Mapped[str | None] = mapped_column(String(64), unique=True)
    expires_at: Mapped[datetime]


@dataclass(frozen=True)
class Minted:
    code: str
    expires_in: int  # seconds


@dataclass(frozen=True)
class Claimed:
    """What the claiming browser is given: its nonce (a cookie) and whose account it is."""

    nonce: str
    operator_name: str


def mint(session: Session, operator_id: int, *, clock: Clock = utcnow) -> Minted:
    """A new one-time code for the operator (who is already authenticated)."""
    now = clock()
    session.execute(delete(SignInCode).where(SignInCode.expires_at <= now))
    code = CODE_PREFIX + secrets.token_urlsafe(32)
    session.add(
        SignInCode(
            code_hash=hash_token(code), operator_id=operator_id, expires_at=now + CODE_LIFETIME
        )
    )
    return Minted(code, int(CODE_LIFETIME.total_seconds()))


def claim(session: Session, code: str, *, clock: Clock = utcnow) -> Claimed:
    """Bind an unclaimed, unexpired code to a new browser nonce; Unauthorized otherwise."""
    if not code.startswith(CODE_PREFIX) or len(code) > MAX_CODE:
        raise Unauthorized("not a sign-in code")
    row = session.execute(
        select(SignInCode, Operator.name)
        .join(Operator, Operator.id == SignInCode.operator_id)
        .where(SignInCode.code_hash == hash_token(code))
        .with_for_update()
    ).first()
    if row is None or row[0].browser_hash is not None or row[0].expires_at <= clock():
        raise Unauthorized(_GONE)
    nonce = secrets.token_urlsafe(32)
    row[0].browser_hash = hash_token(nonce)
    return Claimed(nonce, row[1])


def redeem(session: Session, nonce: str, *, clock: Clock = utcnow) -> WebSignIn:
    """The claimed code's browser (by its nonce) gets a session; the code is gone after."""
    if not nonce or len(nonce) > MAX_CODE:
        raise Unauthorized("no sign-in link was opened in this browser")
    row = session.execute(
        select(SignInCode, Operator.name)
        .join(Operator, Operator.id == SignInCode.operator_id)
        .where(SignInCode.browser_hash == hash_token(nonce))
        .with_for_update()
    ).first()
    if row is None or row[0].expires_at <= clock():
        raise Unauthorized(_GONE)
    code, name = row
    session.delete(code)
    session.flush()  # a second redeem racing this one finds no row
    return start_session(session, code.operator_id, name, clock=clock)
