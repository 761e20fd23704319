"""Whether Steelframe may use a Redis URL: one off loopback must carry a password.

Whatever reaches Redis can write the jobs workers run and the signals instances trust, so an
unauthenticated Redis on a network address is refused at start (`serve`, `worker`, `dev`)
unless STEELFRAME_REDIS_ALLOW_UNAUTHENTICATED says the operator means it. Loopback and Unix
sockets are the host's own; a coding run's network is closed off from them separately.
"""

from __future__ import annotations

import ipaddress
from urllib.parse import parse_qs, urlsplit

from bot.config import Settings
from bot.config_values import ConfigError

LOCAL_NAMES = frozenset({"localhost", "localhost.localdomain", "ip6-localhost"})


def unauthenticated_remote_host(url: str) -> str | None:
    """The host of `url` when it is off loopback and the URL carries no password; else None."""
    parts = urlsplit(url)
    if parts.scheme == "unix":
        return None
    if parts.password or parse_qs(parts.query).get("password"):
        return None
    host = (parts.hostname or "localhost").lower()
    if host in LOCAL_NAMES:
        return None
    try:
        if ipaddress.ip_address(host).is_loopback:
            return None
    except ValueError:
        pass  # a name: only the loopback names above are known to stay on this host
    return host


def require_authenticated_redis(settings: Settings) -> None:
    """Refuse, in one line naming the settings, an unauthenticated Redis off loopback."""
    if not settings.redis_url or settings.redis_allow_unauthenticated:
        return
    host = unauthenticated_remote_host(settings.redis_url)
    if host is not None:
        raise ConfigError(
            f"STEELFRAME_REDIS_URL: Redis at {host} has no password; whatever reaches it can "
            "make workers run jobs. Put a password (or ACL user and password) in the URL, "
            "or set STEELFRAME_REDIS_ALLOW_UNAUTHENTICATED=1"
        )
