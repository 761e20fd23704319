"""The egress allowlist's decisions (bot.lifecycle.egress_policy): which host and port a
coding run may reach, and which resolved addresses are never reached."""

from __future__ import annotations

import ipaddress

import pytest

from bot.config import Settings
from bot.config_values import ConfigError
from bot.host_entries import BadTarget, parse_entry
from bot.lifecycle.egress_policy import (
    Allowlist,
    EgressRefused,
    IPAddress,
    Target,
    check_addresses,
    is_own_address,
    parse_target,
    public_entry,
    url_target,
)
from bot.lifecycle.sandbox import Network, SandboxPolicy


def _ip(text: str) -> IPAddress:
    return ipaddress.ip_address(text)


def _never_own(address: IPAddress) -> bool:
    return False


def test_a_host_without_a_port_allows_the_web_ports_only() -> None:
    allowlist = Allowlist.of(["pypi.org", "registry.npmjs.org:8443"])
    assert allowlist.allows(Target("pypi.org", 443)) and allowlist.allows(Target("pypi.org", 80))
    assert not allowlist.allows(Target("pypi.org", 22))
    assert allowlist.allows(Target("registry.npmjs.org", 8443))
    assert not allowlist.allows(Target("registry.npmjs.org", 443))
    assert not allowlist.allows(Target("files.pypi.org", 443))  # no implied subdomains
    assert not allowlist.allows(Target("pypi.org.evil.example", 443))


def test_hosts_compare_in_lowercase_idna_without_a_trailing_dot() -> None:
    allowlist = Allowlist.of(["Bücher.Example:443", "API.Anthropic.com."])
    assert allowlist.allows(parse_target("xn--bcher-kva.example:443"))
    assert allowlist.allows(parse_target("api.anthropic.COM.:443"))
    assert parse_target("BÜCHER.example:443") == Target("xn--bcher-kva.example", 443)


def test_ipv6_literals_are_bracketed_and_compressed() -> None:
    assert parse_target("[2001:DB8:0:0::1]:443") == Target("2001:db8::1", 443)
    assert str(Target("2001:db8::1", 443)) == "[2001:db8::1]:443"
    assert Allowlist.of(["[2606:4700::1111]:443"]).allows(Target("2606:4700::1111", 443))


@pytest.mark.parametrize(
    "entry",
    [
        "",
        "exa mple.org",
        "-bad-.org",
        "host:99999",
        "user:pw@host",
        "a" * 64 + ".org",
        "h:0",
        "example.org:443/path",
    ],
)
def test_malformed_entries_are_refused(entry: str) -> None:
    with pytest.raises(BadTarget):
        parse_entry(entry)


def test_a_request_target_needs_its_port() -> None:
    with pytest.raises(BadTarget, match="port"):
        parse_target("example.org")
    assert parse_target("example.org:443") == Target("example.org", 443)


def test_a_base_url_gives_its_host_and_scheme_port() -> None:
    assert url_target("https://api.example.com/v1") == Target("api.example.com", 443)
    assert url_target("http://127.0.0.1:8123/v1") == Target("127.0.0.1", 8123)
    assert url_target("http://gateway.internal/") == Target("gateway.internal", 80)
    assert url_target("not a url") is None


@pytest.mark.parametrize(
    ("address", "kind"),
    [
        ("127.0.0.1", "loopback"),
        ("127.8.9.10", "loopback"),
        ("::1", "loopback"),
        ("10.1.2.3", "private"),
        ("172.16.0.9", "private"),
        ("192.168.1.1", "private"),
        ("169.254.169.254", "link-local"),  # cloud metadata
        ("fe80::1", "link-local"),
        ("fd00::5", "private"),  # unique-local
        ("224.0.0.1", "multicast"),
        ("ff02::1", "multicast"),
        ("0.0.0.0", "unspecified"),
        ("::", "unspecified"),
        ("::ffff:127.0.0.1", "loopback"),  # IPv4-mapped: the IPv4 address decides
        ("100.64.0.1", "not public"),  # carrier-grade NAT
    ],
)
def test_non_public_addresses_are_refused_whatever_the_allowlist(address: str, kind: str) -> None:
    target = Target("model.example", 443)
    allowlist = Allowlist.of(["model.example:443"])
    with pytest.raises(EgressRefused, match=f"resolves to a {kind} address"):
        check_addresses(target, [_ip("93.184.215.14"), _ip(address)], allowlist, _never_own)


def test_public_addresses_pass_and_are_the_ones_connected_to() -> None:
    target = Target("model.example", 443)
    found = [_ip("93.184.215.14"), _ip("2606:2800:21f:cb07:6820:80da:af6b:8b2c")]
    assert check_addresses(target, found, Allowlist.of(["model.example"]), _never_own) == found


def test_the_hosts_own_address_is_refused_even_when_public() -> None:
    target = Target("me.example", 443)

    def own(address: IPAddress) -> bool:
        return str(address) == "93.184.215.14"

    with pytest.raises(EgressRefused, match="this machine's own"):
        check_addresses(target, [_ip("93.184.215.14")], Allowlist.of(["me.example"]), own)
    assert is_own_address(_ip("127.0.0.1")) and not is_own_address(_ip("192.0.2.77"))


def test_an_explicit_private_entry_allows_exactly_that_host_and_port() -> None:
    allowlist = Allowlist.of([], ["127.0.0.1:8123", "models.lan:11434"])
    here = Target("127.0.0.1", 8123)
    assert allowlist.allows(here)
    assert check_addresses(here, [_ip("127.0.0.1")], allowlist, _never_own)
    lan = Target("models.lan", 11434)
    assert check_addresses(lan, [_ip("10.0.0.8")], allowlist, _never_own) == [_ip("10.0.0.8")]
    for other in (Target("127.0.0.1", 6379), Target("localhost", 8123)):
        assert not allowlist.allows(other)
    with pytest.raises(EgressRefused):  # allowed by name elsewhere, but not private
        check_addresses(Target("127.0.0.1", 6379), [_ip("127.0.0.1")], allowlist, _never_own)
    with pytest.raises(BadTarget, match="no port"):
        Allowlist.of([], ["127.0.0.1"])


def test_a_host_that_does_not_resolve_is_refused() -> None:
    with pytest.raises(EgressRefused, match="does not resolve"):
        check_addresses(Target("nx.example", 443), [], Allowlist.of(["nx.example"]), _never_own)


def test_the_runs_allowlist_joins_settings_preset_run_and_base_url() -> None:
    policy = SandboxPolicy(
        configured_hosts=("api.anthropic.com:443", "pypi.org"),
        allow_hosts=("registry.npmjs.org",),
        url_variables=("ANTHROPIC_BASE_URL", "UNSET_BASE_URL"),
        private_hosts=("127.0.0.1:9000",),
    )
    allowlist = policy.allowlist({"ANTHROPIC_BASE_URL": "https://gateway.example:8443/v1"})
    assert allowlist.entries() == [
        "127.0.0.1:9000",
        "api.anthropic.com:443",
        "gateway.example:8443",
        "pypi.org",
        "registry.npmjs.org",
    ]


def test_settings_map_the_old_booleans_and_refuse_bad_entries() -> None:
    assert Settings.from_env({"STEELFRAME_CODING_NETWORK": "true"}).coding_network == "allowlist"
    assert Settings.from_env({"STEELFRAME_CODING_NETWORK": "false"}).coding_network == "off"
    assert Settings.from_env({}).coding_network == Network.ALLOWLIST
    with pytest.raises(ConfigError, match="STEELFRAME_CODING_NETWORK"):
        Settings.from_env({"STEELFRAME_CODING_NETWORK": "host"})
    with pytest.raises(
        ConfigError, match=r"STEELFRAME_EGRESS_ALLOW: .*'bad host' is not a host name"
    ):
        Settings.from_env({"STEELFRAME_EGRESS_ALLOW": "pypi.org, bad host"})
    with pytest.raises(ConfigError, match="STEELFRAME_EGRESS_PRIVATE"):
        Settings.from_env({"STEELFRAME_EGRESS_PRIVATE": "127.0.0.1"})
    settings = Settings.from_env({"STEELFRAME_EGRESS_ALLOW": "pypi.org,files.pythonhosted.org:443"})
    assert settings.egress_allow == ("pypi.org", "files.pythonhosted.org:443")


def test_a_repository_may_add_names_and_public_addresses_but_no_private_one() -> None:
    assert public_entry("Registry.NPMjs.org") == "registry.npmjs.org"
    assert public_entry("pypi.org:8443") == "pypi.org:8443"
    assert public_entry("[2606:4700::1111]:443") == "[2606:4700::1111]:443"
    for private in ("127.0.0.1:6379", "10.0.0.5", "[::1]:80", "169.254.169.254"):
        with pytest.raises(BadTarget, match="only the operator can allow one"):
            public_entry(private)
