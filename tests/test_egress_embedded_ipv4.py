"""An IPv6 address that carries an IPv4 one reaches that IPv4 address: the egress policy
judges it by the address inside (6to4, Teredo, NAT64, IPv4-mapped/-translated/-compatible),
and names site-local and other special ranges itself, whatever Python's `is_global` says in
the version that runs it (3.11 calls 6to4 `2002:7f00:1::1` and site-local `fec0::1`
global)."""

from __future__ import annotations

import ipaddress

import pytest

from bot.host_entries import BadTarget
from bot.lifecycle.egress_policy import (
    Allowlist,
    EgressRefused,
    IPAddress,
    Target,
    check_addresses,
    public_entry,
)

PUBLIC_V4 = "93.184.215.14"


def _teredo(server: str, client: str) -> str:
    """A Teredo address (RFC 4380): 2001:0::/32, the server, flags, port, and the client
    address with every bit flipped."""
    flipped = int(ipaddress.IPv4Address(client)) ^ 0xFFFFFFFF
    value = (0x20010000 << 96) | (int(ipaddress.IPv4Address(server)) << 64) | flipped
    return str(ipaddress.IPv6Address(value))


def _inside(prefix: str, v4: str) -> str:
    """`v4` in the low 32 bits under `prefix` (NAT64, mapped, translated, compatible)."""
    return str(
        ipaddress.IPv6Address(int(ipaddress.IPv6Address(prefix)) | int(ipaddress.IPv4Address(v4)))
    )


REFUSED = [
    # 6to4: 2002:AABB:CCDD::/48 is the IPv4 address AA.BB.CC.DD's network
    ("2002:7f00:1::1", "loopback"),
    ("2002:a00:5::1", "private"),
    ("2002:a9fe:a9fe::1", "link-local"),  # cloud metadata 169.254.169.254
    ("2002:c0a8:101:1::1", "private"),
    # Teredo: the server's or the client's address
    (_teredo("127.0.0.1", PUBLIC_V4), "loopback"),
    (_teredo(PUBLIC_V4, "10.0.0.7"), "private"),
    (_teredo(PUBLIC_V4, "169.254.169.254"), "link-local"),
    # NAT64, well-known and local-use
    (_inside("64:ff9b::", "127.0.0.1"), "loopback"),
    (_inside("64:ff9b::", "10.1.2.3"), "private"),
    (_inside("64:ff9b::", "169.254.169.254"), "link-local"),
    (_inside("64:ff9b:1::", "127.0.0.1"), "loopback"),
    (_inside("64:ff9b:1::", PUBLIC_V4), "private"),  # local use: never public
    # IPv4-mapped, -translated (SIIT), -compatible
    (_inside("::ffff:0:0", "127.0.0.1"), "loopback"),
    (_inside("::ffff:0:0", "192.168.1.1"), "private"),
    (_inside("::ffff:0:0:0", "127.0.0.1"), "loopback"),
    (_inside("::", "127.0.0.1"), "loopback"),
    (_inside("::", "10.0.0.1"), "private"),
    ("::1", "loopback"),  # inside ::/96, but the IPv6 loopback itself
    ("::", "unspecified"),
    # special IPv6 ranges named by the policy, not by the Python version
    ("fec0::1", "private"),  # site-local
    ("feff:ffff::1", "private"),  # site-local's last part
    ("fd12:3456::1", "private"),
    ("2001:db8::1", "reserved"),
    ("3fff::1", "reserved"),
    ("100::1", "reserved"),
]

REACHED = [
    "2002:5db8:d70e::1",  # 6to4 of 93.184.215.14
    _teredo(PUBLIC_V4, "8.8.8.8"),
    _inside("64:ff9b::", PUBLIC_V4),
    _inside("::ffff:0:0", PUBLIC_V4),
    "2606:2800:21f:cb07:6820:80da:af6b:8b2c",
]


@pytest.mark.parametrize(("address", "kind"), REFUSED)
def test_an_ipv6_address_is_judged_by_the_ipv4_address_it_carries(address: str, kind: str) -> None:
    target = Target("model.example", 443)
    found = [ipaddress.ip_address(PUBLIC_V4), ipaddress.ip_address(address)]
    with pytest.raises(EgressRefused, match=f"resolves to a {kind} address"):
        check_addresses(target, found, Allowlist.of(["model.example"]), lambda _: False)
    with pytest.raises(BadTarget):  # nor may a repository allow it by address
        public_entry(f"[{address}]:443")


@pytest.mark.parametrize("address", REACHED)
def test_one_that_carries_a_public_ipv4_address_is_reached(address: str) -> None:
    target = Target("model.example", 443)
    found = [ipaddress.ip_address(address)]
    assert check_addresses(target, found, Allowlist.of(["model.example"]), lambda _: False) == found


@pytest.mark.parametrize("address", ["2002:5db8:d70e::1", _inside("64:ff9b::", PUBLIC_V4)])
def test_one_that_carries_this_machine_s_own_public_address_is_refused(address: str) -> None:
    """The machine's own public IPv4 address (here 93.184.215.14), carried by 6to4 or NAT64."""
    target = Target("me.example", 443)

    def own(candidate: IPAddress) -> bool:
        return str(candidate) == PUBLIC_V4

    with pytest.raises(EgressRefused, match="this machine's own"):
        check_addresses(target, [ipaddress.ip_address(address)], Allowlist.of(["me.example"]), own)
