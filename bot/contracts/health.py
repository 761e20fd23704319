"""What /healthz and /readyz answer (docs/api.md, the service routes): the process's health,
and whether this instance can serve, with each check's reason.

Declared once here; `operator_api/schemas.py` generates their OpenAPI components from these
Structs. Every key is always sent (a null stays a null); the schemas allow no other.
"""

from __future__ import annotations

from typing import Literal

from msgspec import Struct

from bot.contracts.tasks import CodingSandbox


class Health(Struct, frozen=True, forbid_unknown_fields=True):
    """Liveness with how the dependencies are: `degraded` when the database is unreachable
    or Redis, configured, is."""

    status: Literal["ok", "degraded"]
    version: str
    database: bool
    redis: bool | None  # None: no Redis configured
    coding_sandbox: CodingSandbox


class ReadinessCheck(Struct, frozen=True, forbid_unknown_fields=True):
    """One thing this instance needs to serve, and why it is or is not there."""

    ok: bool
    detail: str


class Readiness(Struct, frozen=True, forbid_unknown_fields=True):
    """`not_ready` (with a 503) when any check fails; checks by name, in the order made."""

    status: Literal["ready", "not_ready"]
    checks: dict[str, ReadinessCheck]
