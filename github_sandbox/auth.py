"""Who is calling: the App (RS256 JWT checked against its public key), an installation
(a token the sandbox issued, unexpired), or a user (a token handed out by the control API).

Failures answer as GitHub does: 401 with a message, and nothing done.
"""

from __future__ import annotations

import secrets
from dataclasses import dataclass

import jwt

from github_sandbox.operations import SandboxError
from github_sandbox.state import Installation, IssuedToken, User, World

# GitHub refuses App JWTs whose exp is more than 10 minutes ahead; a little slack for skew.
MAX_JWT_AHEAD_SECONDS = 600 + 30
TOKEN_TTL_SECONDS = 3600.0


@dataclass(frozen=True)
class Caller:
    kind: str  # "app" | "installation" | "user"
    user: User
    installation: Installation | None = None


def _credential(header: str) -> tuple[str, str]:
    scheme, _, value = header.partition(" ")
    if not value.strip():
        raise SandboxError(401, "Requires authentication")
    return scheme.lower(), value.strip()


def verify_app_jwt(world: World, header: str) -> Caller:
    scheme, token = _credential(header)
    if scheme != "bearer":
        raise SandboxError(401, "A JSON web token could not be decoded")
    now = world.now()
    try:
        claims = jwt.decode(
            token,
            world.app.public_key_pem,
            algorithms=["RS256"],
            options={"require": ["iat", "exp", "iss"], "verify_exp": False, "verify_iat": False},
        )
    except jwt.PyJWTError as exc:
        raise SandboxError(401, "A JSON web token could not be decoded") from exc
    if str(claims["iss"]) != str(world.app.id):
        raise SandboxError(401, "'Issuer' claim ('iss') must be an Integer")
    exp, iat = claims["exp"], claims["iat"]
    if not isinstance(exp, int) or exp <= now:
        raise SandboxError(
            401,
            "'Expiration time' claim ('exp') must be a numeric value representing the future"
            " time at which the assertion expires",
        )
    if exp > now + MAX_JWT_AHEAD_SECONDS:
        raise SandboxError(401, "'Expiration time' claim ('exp') is too far in the future")
    if not isinstance(iat, int) or iat > now + 60:
        raise SandboxError(
            401, "'Issued at' claim ('iat') must be an Integer representing a time in the past"
        )
    return Caller("app", world.app.bot)


def resolve_token(world: World, header: str) -> Caller:
    """An installation token or a sandbox user token (`token X` or `Bearer X`)."""
    scheme, token = _credential(header)
    if scheme not in ("token", "bearer"):
        raise SandboxError(401, "Bad credentials")
    issued = world.tokens.get(token)
    if issued is not None:
        if issued.expires_at <= world.now():
            raise SandboxError(401, "Bad credentials")
        installation = world.installations.get(issued.installation_id)
        if installation is None:
            raise SandboxError(401, "Bad credentials")
        if installation.suspended_at is not None:
            raise SandboxError(403, "This installation has been suspended")
        return Caller("installation", world.app.bot, installation)
    login = world.user_tokens.get(token)
    if login is not None:
        return Caller("user", world.users[login])
    raise SandboxError(401, "Bad credentials")


def issue_installation_token(
    world: World, installation: Installation, ttl: float
) -> tuple[str, IssuedToken]:
    # Longer than the classic 40 characters: GitHub is moving to longer tokens and the
    # client must not assume a length.
    token = "ghs_" + secrets.token_urlsafe(48)
    issued = IssuedToken(installation.id, world.now() + ttl)
    world.tokens[token] = issued
    return token, issued


def issue_user_token(world: World, login: str) -> str:
    user = world.user(login)
    token = "ghp_" + secrets.token_urlsafe(30)
    world.user_tokens[token] = user.login.lower()
    return token
