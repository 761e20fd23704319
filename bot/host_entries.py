"""Host names and `host[:port]` entries as the settings and the egress allowlists write
them (bot.config_values reads them, bot.lifecycle.egress_policy decides with them): parsed
and normalised here, below both, so the settings never import the task lifecycle."""

from __future__ import annotations

import ipaddress
import re
from urllib.parse import urlsplit

_LABEL = re.compile(r"(?!-)[a-z0-9-]{1,63}(?<!-)")
MAX_HOST = 253


class BadTarget(ValueError):
    """A host or host:port that is not one (an allowlist entry, a request's target)."""


def normal_host(host: str) -> str:
    """`host` as the allowlist compares it: IDNA (ASCII), lowercase, no trailing dot; an
    IP literal in its compressed form. BadTarget when it is not a host name."""
    host = host.strip().removeprefix("[").removesuffix("]").rstrip(".")
    try:
        return str(ipaddress.ip_address(host))
    except ValueError:
        pass
    try:
        ascii_host = host.encode("idna").decode("ascii").lower()
    except UnicodeError as exc:
        raise BadTarget(f"{host[:80]!r} is not a host name") from exc
    labels = ascii_host.split(".")
    if len(ascii_host) > MAX_HOST or not all(_LABEL.fullmatch(label) for label in labels):
        raise BadTarget(f"{host[:80]!r} is not a host name")
    return ascii_host


def parse_entry(entry: str, *, port_required: bool = False) -> tuple[str, int | None]:
    """`host`, `host:port`, `[v6]:port` or a URL as (host, port or None)."""
    text = entry.strip()
    bare = "://" not in text
    try:
        parts = urlsplit(f"//{text}" if bare else text)
        port = parts.port
    except ValueError as exc:
        raise BadTarget(f"{entry!r} is not host[:port]") from exc
    extra = bare and (parts.path or parts.query or parts.fragment)
    if not parts.hostname or parts.username or parts.password or extra:
        raise BadTarget(f"{entry!r} is not host[:port]")
    if port is None and parts.scheme in ("http", "https"):
        port = 443 if parts.scheme == "https" else 80
    if port_required and not port:
        raise BadTarget(f"{entry!r} names no port (host:port)")
    if port == 0:
        raise BadTarget(f"{entry!r}: port 0")
    return normal_host(parts.hostname), port
