"""Typed records of what GitHub answers the App about itself: who it is (`GET /app`), which
installation serves a repository, and an installation token. Only the fields Steelframe
reads, each one GitHub's OpenAPI description gives the answer (tests/test_github_records.py
holds them to it)."""

from __future__ import annotations

import msgspec


class App(msgspec.Struct, frozen=True):
    id: int
    name: str
    html_url: str
    # Not promised by GitHub's description, but every App has one; the client refuses an
    # answer without it (its bot user is `<slug>[bot]`).
    slug: str = ""


class Installation(msgspec.Struct, frozen=True):
    id: int
    # Set while the installation is suspended: GitHub still names it for its repositories
    # (GET /repos/{owner}/{repo}/installation answers 200), but it serves nothing.
    suspended_at: str | None = None


class AccessToken(msgspec.Struct, frozen=True):
    """Read once into `bot.github.app_auth.InstallationToken`, which keeps the token secret."""

    token: str
    expires_at: str  # ISO 8601, "Z" for UTC

    def __repr__(self) -> str:  # never the token, in a log line or a traceback
        return f"AccessToken(token='***', expires_at={self.expires_at!r})"

    __str__ = __repr__


class CollaboratorPermission(msgspec.Struct, frozen=True):
    permission: str  # "admin" | "write" | "read" | "none" (maintain and triage folded in)
