"""Who is calling: the App (RS256 JWT checked against its public key), an installation
(a token the sandbox issued, unexpired), or a user (a token handed out by the control API).

Failures answer as GitHub does: 401 with a message, and nothing done.
"""

from __future__ import annotations

import secrets
from dataclasses import dataclass

import jwt

from github_sandbox.operations import SandboxError
from github_sandbox.permissions import OPERATIONS
from github_sandbox.state import AppInfo, Installation, IssuedToken, User, World

# GitHub refuses App JWTs whose exp is more than 10 minutes ahead; a little slack for skew.
MAX_JWT_AHEAD_SECONDS = 600 + 30
TOKEN_TTL_SECONDS = 3600.0


@dataclass(frozen=True)
class Caller:
    kind: str  # "app" | "installation" | "user"
    user: User
    installation: Installation | None = None
    token: IssuedToken | None = None
    app: AppInfo | None = None  # the App whose JWT (or whose installation's token) this is


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
    app = _claimed_app(world, token)
    try:
        claims = jwt.decode(
            token,
            app.public_key_pem,
            algorithms=["RS256"],
            options={"require": ["iat", "exp", "iss"], "verify_exp": False, "verify_iat": False},
        )
    except jwt.PyJWTError as exc:
        raise SandboxError(401, "A JSON web token could not be decoded") from exc
    if str(claims["iss"]) != str(app.id):
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
    return Caller("app", app.bot, app=app)


def _claimed_app(world: World, token: str) -> AppInfo:
    """The App the JWT says it is from (`iss`): its key is the one to check the signature
    with. Each App registered on the sandbox has its own key pair, as on GitHub."""
    try:
        issuer = jwt.decode(token, options={"verify_signature": False}).get("iss")
    except jwt.PyJWTError as exc:
        raise SandboxError(401, "A JSON web token could not be decoded") from exc
    try:
        app = world.app_by_id(int(str(issuer)))
    except ValueError:
        app = None
    if app is None:
        raise SandboxError(401, "'Issuer' claim ('iss') must be an Integer")
    return app


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
        app = world.app_of(installation)
        return Caller("installation", app.bot, installation, issued, app=app)
    login = world.user_tokens.get(token)
    if login is not None:
        return Caller("user", world.users[login])
    raise SandboxError(401, "Bad credentials")


LEVELS = {"read": 1, "write": 2, "admin": 3}
NOT_ACCESSIBLE = 403, "Resource not accessible by integration"


def token_scope(
    world: World, installation: Installation, data: object
) -> tuple[frozenset[str] | None, dict[str, str] | None]:
    """The `repositories` and `permissions` of an access-token request, checked as GitHub
    does: only the installation's repositories, only permissions the App was granted."""
    if not isinstance(data, dict):
        raise SandboxError(400, "Problems parsing JSON")
    repos: frozenset[str] | None = None
    names = data.get("repositories")
    if names is not None:
        owner = installation.account.login.lower()
        if not isinstance(names, list) or not all(isinstance(n, str) for n in names):
            raise SandboxError(422, "Invalid request: repositories must be a list of names")
        repos = frozenset(f"{owner}/{name.lower()}" for name in names)
        if not repos <= installation.repos:
            raise SandboxError(
                422,
                "There is at least one repository that does not exist or is not accessible "
                "to the parent installation.",
            )
    wanted = data.get("permissions")
    if wanted is not None:
        granted = world.app_of(installation).permissions
        if not isinstance(wanted, dict) or not all(
            isinstance(level, str) and level in LEVELS for level in wanted.values()
        ):
            raise SandboxError(422, "Invalid request: permissions must map names to levels")
        for name, level in wanted.items():
            if LEVELS[level] > LEVELS.get(granted.get(name, ""), 0):
                raise SandboxError(
                    422, "The permissions requested are not granted to this installation."
                )
        wanted = {"metadata": "read", **wanted}
    return repos, wanted


# The permission each part of a repository's API needs (GitHub docs, "Permissions
# required for GitHub Apps"); anything else under the repository (the repository itself,
# a collaborator's permission) needs `metadata`.
AREA_PERMISSIONS = {
    "issues": "issues",
    "labels": "issues",
    "pulls": "pull_requests",
    "contents": "contents",
    "git": "contents",
}


def needed_permission(repo: str, method: str, path: str) -> tuple[str, int]:
    """(permission name, level) a call on `path` (under /repos/`repo`) needs."""
    prefix = f"/repos/{repo}".lower()
    rest = path[len(prefix) :] if path.lower().startswith(prefix) else path
    name = AREA_PERMISSIONS.get(rest.strip("/").split("/", 1)[0], "metadata")
    return name, 1 if method in ("GET", "HEAD") else 2


def check_scope(
    caller: Caller, repo: str, method: str, path: str, route: str | None = None
) -> None:
    """As GitHub answers a token narrowed by its request: 404 for a repository it was not
    issued for (hidden, like any repository a token cannot reach); 403 "Resource not
    accessible by integration" for a permission it lacks, or for an operation installation
    tokens may not call. `route`: the operation's route template, looked up in
    `permissions.OPERATIONS` (git over HTTP has none: its path says `contents`)."""
    token = caller.token
    if token is None:
        return
    if token.repos is not None and repo.lower() not in token.repos:
        raise SandboxError(404, "Not Found")
    described = None if route is None else OPERATIONS.get((method, route))
    if described is not None and not described.installation_tokens:
        raise SandboxError(*NOT_ACCESSIBLE)
    if token.permissions is None:
        return
    if described is not None:
        name, need = described.permission, described.level
    else:
        name, need = needed_permission(repo, method, path)
    if LEVELS.get(token.permissions.get(name, ""), 0) < need:
        raise SandboxError(*NOT_ACCESSIBLE)


@dataclass(frozen=True)
class Presented:
    """The credential a request carried, as the sandbox knows it (for tests to see which
    token served each request; never part of an answer)."""

    kind: str  # "app" | "installation" | "user" | "none" | "unknown"
    installation_id: int | None = None
    repos: frozenset[str] | None = None  # None: every repository of the installation
    permissions: tuple[tuple[str, str], ...] | None = None  # None: all the App was granted


def presented(world: World, header: str) -> Presented:
    scheme, _, value = header.partition(" ")
    value = value.strip()
    if not value:
        return Presented("none")
    issued = world.tokens.get(value)
    if issued is not None:
        permissions = issued.permissions
        return Presented(
            "installation",
            issued.installation_id,
            issued.repos,
            None if permissions is None else tuple(sorted(permissions.items())),
        )
    if value in world.user_tokens:
        return Presented("user")
    return Presented("app" if scheme.lower() == "bearer" and value.count(".") == 2 else "unknown")


def rate_key(world: World, header: str) -> str:
    """Whose rate budget a request spends: an installation's for any of its tokens (GitHub
    counts installation tokens per installation), else the credential's own."""
    issued = world.tokens.get(header.partition(" ")[2].strip())
    return f"installation:{issued.installation_id}" if issued is not None else header


def issue_installation_token(
    world: World,
    installation: Installation,
    ttl: float,
    *,
    repos: frozenset[str] | None = None,
    permissions: dict[str, str] | None = None,
) -> tuple[str, IssuedToken]:
    # Longer than the classic 40 characters: GitHub is moving to longer tokens and the
    # client must not assume a length.
    token = "ghs_" + secrets.token_urlsafe(48)
    issued = IssuedToken(installation.id, world.now() + ttl, repos, permissions)
    world.tokens[token] = issued
    return token, issued


def issue_user_token(world: World, login: str) -> str:
    user = world.user(login)
    token = "ghp_" + secrets.token_urlsafe(30)
    world.user_tokens[token] = user.login.lower()
    return token
