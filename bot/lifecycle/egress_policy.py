"""Which hosts a coding run may reach: its allowlist, and the check of the addresses a
host resolves to (docs/lifecycle.md, "Egress").

Pure decisions on values: the proxy (`bot.lifecycle.egress_proxy`) does the resolving and
the connecting. A host is reachable when it is on the run's allowlist and every address it
resolves to is a public one that is not this machine's own; an entry of the operator's
explicit private list (host:port) skips the address check for exactly that host and port.
"""

from __future__ import annotations

import ipaddress
import socket
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass

from bot.host_entries import BadTarget, parse_entry

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address
# A host named without a port may be reached on the web's two ports.
DEFAULT_PORTS = (443, 80)


class EgressRefused(Exception):
    """The proxy refuses a request; the message is the one-line reason the runtime sees."""


@dataclass(frozen=True, order=True)
class Target:
    """A host (lowercase ASCII: a DNS name, or an IP literal without brackets) and a port."""

    host: str
    port: int

    def __str__(self) -> str:
        return f"[{self.host}]:{self.port}" if ":" in self.host else f"{self.host}:{self.port}"

    @property
    def address(self) -> IPAddress | None:
        """The host as an IP address when it is a literal one."""
        try:
            return ipaddress.ip_address(self.host)
        except ValueError:
            return None


def parse_target(authority: str) -> Target:
    """A request's `host:port` (CONNECT's authority)."""
    host, port = parse_entry(authority, port_required=True)
    assert port is not None
    return Target(host, port)


def url_target(url: str) -> Target | None:
    """Where an operator's base URL (`ANTHROPIC_BASE_URL=...`) points, or None."""
    try:
        host, port = parse_entry(url)
    except BadTarget:
        return None
    return Target(host, port or 443)


def public_entry(entry: str) -> str:
    """An allowlist entry a repository (or anything short of the operator) may add: a host
    name or a public IP literal, with an optional port. BadTarget says why not; a name is
    still checked against what it resolves to when a request comes."""
    host, port = parse_entry(entry)
    literal = Target(host, port or 443).address
    reason = unreachable_reason(literal) if literal is not None else None
    if reason is not None:
        raise BadTarget(f"{entry!r} is a {reason} address: only the operator can allow one")
    return str(Target(host, port)) if port else host


@dataclass(frozen=True)
class Allowlist:
    """The run's allowlist: entries with a port allow that port, entries without allow
    DEFAULT_PORTS; `private` entries (host, port) are allowed and skip the address check."""

    hosts: frozenset[tuple[str, int | None]] = frozenset()
    private: frozenset[Target] = frozenset()

    @classmethod
    def of(cls, entries: Iterable[str], private: Iterable[str] = ()) -> Allowlist:
        """From settings-style entries; BadTarget names the first malformed one."""
        hosts = frozenset(parse_entry(entry) for entry in entries)
        exact = frozenset(Target(*_with_port(parse_entry(e, port_required=True))) for e in private)
        return cls(hosts, exact)

    def allows(self, target: Target) -> bool:
        if target in self.private:
            return True
        if (target.host, target.port) in self.hosts:
            return True
        return target.port in DEFAULT_PORTS and (target.host, None) in self.hosts

    def entries(self) -> list[str]:
        """Every entry, as the operator would write it (for logs and the task)."""
        named = [str(Target(h, p)) if p else h for h, p in self.hosts]
        return sorted({*named, *(str(t) for t in self.private)})


def _with_port(entry: tuple[str, int | None]) -> tuple[str, int]:
    host, port = entry
    assert port is not None
    return host, port


_V6 = ipaddress.IPv6Network
# IPv6 ranges whose addresses carry an IPv4 one, which is where a packet to them ends up
# (through the host's own tunnel or translator, or one on the way): such an address is
# judged by the IPv4 address inside it, not by Python's flags for the IPv6 range, which
# differ between versions (3.11 calls 6to4's `2002:7f00:1::1`, 127.0.0.1 inside, global).
_IPV4_TRANSLATED = _V6("::ffff:0:0:0/96")  # SIIT (RFC 2765), beside ::ffff:0:0/96 (mapped)
_IPV4_COMPATIBLE = _V6("::/96")  # deprecated (RFC 4291 2.5.5.1); :: and ::1 are not
_NAT64 = _V6("64:ff9b::/96")  # the well-known prefix (RFC 6052)
# The local-use translation prefix (RFC 8215): a network picks where inside it the IPv4
# address sits, so the /96 reading may not be the one used, and IANA lists the prefix as not
# globally reachable. Judged by the /96 reading, then refused as private whatever it says.
_NAT64_LOCAL = _V6("64:ff9b:1::/48")
# IANA's special-purpose ranges that are not globally reachable, named here rather than
# left to `is_global`, whose table changes with the Python version.
_NOT_PUBLIC_V6 = (
    ("private", _V6("fec0::/10")),  # site-local (deprecated by RFC 3879, still routable)
    ("private", _V6("fc00::/7")),  # unique-local
    ("reserved", _V6("100::/64")),  # discard-only
    ("reserved", _V6("2001:db8::/32")),  # documentation
    ("reserved", _V6("3fff::/20")),  # documentation (RFC 9637)
    ("reserved", _V6("5f00::/16")),  # SRv6 SIDs (RFC 9602)
)


def embedded_ipv4(address: ipaddress.IPv6Address) -> list[ipaddress.IPv4Address]:
    """The IPv4 addresses an IPv6 address carries (6to4, Teredo's server and client, NAT64,
    IPv4-mapped, -translated and -compatible), or [] when it carries none."""
    low = ipaddress.IPv4Address(int(address) & 0xFFFFFFFF)
    if address.ipv4_mapped is not None:
        return [address.ipv4_mapped]
    if address.sixtofour is not None:
        return [address.sixtofour]
    if address.teredo is not None:
        return list(address.teredo)
    if any(address in net for net in (_IPV4_TRANSLATED, _NAT64, _NAT64_LOCAL)):
        return [low]
    if address in _IPV4_COMPATIBLE and int(address) > 1:
        return [low]
    return []


def unreachable_reason(address: IPAddress) -> str | None:
    """Why this address is never reached from a coding run, or None when it may be."""
    if isinstance(address, ipaddress.IPv6Address):
        inner = embedded_ipv4(address)
        if inner:
            reasons = [reason for v4 in inner if (reason := unreachable_reason(v4))]
            if reasons:
                return reasons[0]
            return "private" if address in _NAT64_LOCAL else None
        for label, network in _NOT_PUBLIC_V6:
            if address in network:
                return label
    for label, hit in (
        ("loopback", address.is_loopback),
        ("link-local", address.is_link_local),
        ("multicast", address.is_multicast),
        ("unspecified", address.is_unspecified),
        ("private", address.is_private),
        ("reserved", address.is_reserved),
    ):
        if hit:
            return label
    if not address.is_global:
        return "not public"
    return None


def check_addresses(
    target: Target,
    addresses: Sequence[IPAddress],
    allowlist: Allowlist,
    is_own: Callable[[IPAddress], bool],
) -> list[IPAddress]:
    """The addresses to connect to (exactly those checked: no second lookup), or
    EgressRefused when any of them may not be reached."""
    if not addresses:
        raise EgressRefused(f"{target.host} does not resolve")
    if target in allowlist.private:
        return list(addresses)
    for address in addresses:
        reason = unreachable_reason(address)
        # An IPv6 address carrying this machine's IPv4 one (6to4, NAT64) reaches it too.
        inner = embedded_ipv4(address) if isinstance(address, ipaddress.IPv6Address) else []
        if reason is None and any(is_own(a) for a in (address, *inner)):
            raise EgressRefused(f"{target} resolves to this machine's own address ({address})")
        if reason is not None:
            raise EgressRefused(f"{target} resolves to a {reason} address ({address})")
    return list(addresses)


def is_own_address(address: IPAddress) -> bool:
    """Whether `address` is one of this machine's: only a local address can be bound."""
    family = socket.AF_INET6 if address.version == 6 else socket.AF_INET
    with socket.socket(family, socket.SOCK_STREAM) as probe:
        try:
            probe.bind((str(address), 0))
        except OSError:
            return False
    return True
