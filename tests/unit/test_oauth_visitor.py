"""The anonymous visitor's sealed cookie, the source address its budgets are kept by, and the
ANGELOS_TRUSTED_PROXIES rule."""

from __future__ import annotations

import ipaddress

import pytest
from cryptography.hazmat.primitives.asymmetric import ec

from service.auth.server.browser.source import source_address
from service.auth.server.browser.visitor import LIFETIME_S, MAX_COOKIE_CHARS, VisitorSeal
from service.auth.server.store.records import ConsentRequest
from service.config.table.rules import Networks

NOW = 1_800_000_000
REQUEST = ConsentRequest(
    client_id="angelos-test-client",
    redirect_uri="https://client.example.com/callback",
    scopes=("mail.read", "mail.send"),
    state="s1",
    code_challenge="E9Melhoa2OwvFrEMTJguCHaoeK1t8URWbuGJSstw-cM",
)
PROXIES = (ipaddress.ip_network("10.0.0.0/8"), ipaddress.ip_network("fd00::/8"))


def seal() -> VisitorSeal:
    return VisitorSeal(ec.generate_private_key(ec.SECP256R1()))


def test_a_sealed_visitor_opens_to_itself_until_its_end() -> None:
    visitors = seal()
    visitor = visitors.fresh(NOW, REQUEST)
    value = visitors.seal(visitor)

    assert value is not None and value.startswith("v1.")
    assert visitor == visitors.open(value, NOW + LIFETIME_S - 1)
    assert None is visitors.open(value, NOW + LIFETIME_S)


def test_a_cookie_changed_forged_or_sealed_under_another_key_does_not_open() -> None:
    visitors = seal()
    value = visitors.seal(visitors.fresh(NOW))
    assert value is not None
    flipped = value[:-2] + ("A" if value[-2] != "A" else "B") + value[-1]

    assert None is visitors.open(flipped, NOW)
    assert None is seal().open(value, NOW)
    assert None is visitors.open("v1." + "A" * 80, NOW)
    assert None is visitors.open("A" * 43, NOW)  # a session token is not a visitor


def test_renewal_keeps_the_id_and_csrf_and_moves_the_end() -> None:
    visitors = seal()
    first = visitors.fresh(NOW)
    later = visitors.renewed(first, NOW + 300, REQUEST)

    assert (first.id, first.csrf) == (later.id, later.csrf)
    assert (NOW + 300 + LIFETIME_S, REQUEST) == (later.expires_unix, later.pending)
    assert first.csrf not in repr(later) and first.id not in repr(later)


def test_a_request_too_long_for_a_cookie_is_not_sealed() -> None:
    visitors = seal()
    long_state = ConsentRequest(
        client_id=REQUEST.client_id,
        redirect_uri=REQUEST.redirect_uri + "?" + "x" * 2048,
        scopes=REQUEST.scopes,
        state="s" * 1024,
        code_challenge=REQUEST.code_challenge,
    )
    typical = visitors.seal(visitors.fresh(NOW, REQUEST))

    assert None is visitors.seal(visitors.fresh(NOW, long_state))
    assert typical is not None and len(typical) < MAX_COOKIE_CHARS // 4


@pytest.mark.parametrize(
    ("peer", "forwarded", "source"),
    [
        ("203.0.113.7", [], "203.0.113.7/32"),
        ("203.0.113.7", ["198.51.100.1"], "203.0.113.7/32"),  # an untrusted peer's header
        ("10.0.0.2", [], "10.0.0.2/32"),  # a trusted proxy that forwarded nothing
        ("10.0.0.2", ["198.51.100.1"], "198.51.100.1/32"),
        ("10.0.0.2", ["1.1.1.1, 198.51.100.1, 10.0.0.9"], "198.51.100.1/32"),  # right to left
        ("10.0.0.2", ["1.1.1.1", "198.51.100.1"], "198.51.100.1/32"),  # repeated headers
        ("10.0.0.2", ["1.1.1.1, not-an-ip, 10.0.0.9"], "10.0.0.9/32"),  # stops at the hop
        ("10.0.0.2", ["198.51.100.1:4711"], "10.0.0.2/32"),
        ("10.0.0.2", ["2001:db8:1:2:3::9"], "2001:db8:1:2::/64"),  # IPv6 per /64
        ("::ffff:203.0.113.7", [], "203.0.113.7/32"),  # IPv4-mapped counts as IPv4
        ("fd00::1", ["10.0.0.3, 203.0.113.9"], "203.0.113.9/32"),
        (None, ["198.51.100.1"], "unknown"),  # no IP peer: one shared bucket
    ],
)
def test_the_source_is_the_first_untrusted_hop_from_the_right(
    peer: str | None, forwarded: list[str], source: str
) -> None:
    assert source == source_address(peer, forwarded, PROXIES)


def test_without_trusted_proxies_forwarded_addresses_are_ignored() -> None:
    assert "10.0.0.2/32" == source_address("10.0.0.2", ["198.51.100.1"], ())


def test_trusted_proxies_are_addresses_or_blocks_without_host_bits() -> None:
    rule = Networks(32)

    assert (
        (ipaddress.ip_network("10.0.0.0/8"), ipaddress.ip_network("192.0.2.1/32")),
        None,
    ) == rule.parse("10.0.0.0/8, 192.0.2.1")
    assert ((ipaddress.ip_network("::1/128"),), None) == rule.parse("::1")
    for bad in ("10.0.0.1/8", "", "10.0.0.0/8,", "proxy.example", ",".join(["::1"] * 33)):
        value, problem = rule.parse(bad)
        assert None is value and problem is not None and "CIDR" in problem
