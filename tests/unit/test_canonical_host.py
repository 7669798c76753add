"""The first-party canonical host gate, as a pure decision over headers and the raw target."""

from __future__ import annotations

import pytest
from multidict import CIMultiDict, CIMultiDictProxy

from service.auth.canonical_host import refused

ISSUER = "mail.example.com"


def headers(*pairs: tuple[str, str]) -> CIMultiDictProxy[str]:
    return CIMultiDictProxy(CIMultiDict(pairs))


def test_the_issuer_host_passes() -> None:
    assert refused(headers(("Host", ISSUER)), "/healthz", ISSUER) is False


def test_forwarded_headers_naming_the_issuer_pass() -> None:
    found = headers(("Host", ISSUER), ("X-Forwarded-Host", ISSUER), ("X-Forwarded-Proto", "https"))
    assert refused(found, "/mcp?x=1", ISSUER) is False


@pytest.mark.parametrize(
    "pairs",
    [
        [("Host", "127.0.0.1:8080")],
        [("Host", "MAIL.example.com")],
        [("Host", f"{ISSUER}:443")],
        [],
        [("Host", ISSUER), ("Host", ISSUER)],
        [("Host", ISSUER), ("X-Forwarded-Proto", "http")],
        [("Host", ISSUER), ("X-Forwarded-Proto", "https"), ("X-Forwarded-Proto", "https")],
        [("Host", ISSUER), ("X-Forwarded-Host", ISSUER), ("X-Forwarded-Host", ISSUER)],
        [("Host", ISSUER), ("X-Forwarded-Host", "attacker.example")],
    ],
    ids=[
        "loopback-host",
        "other-case",
        "explicit-port",
        "no-host",
        "two-hosts",
        "forwarded-http",
        "two-protos",
        "two-forwarded-hosts",
        "foreign-forwarded-host",
    ],
)
def test_requests_off_the_issuer_origin_are_refused(pairs: list[tuple[str, str]]) -> None:
    assert refused(headers(*pairs), "/healthz", ISSUER) is True


@pytest.mark.parametrize(
    "target",
    ["/oauth/%61uthorize", "/mcp%2F..", "https://mail.example.com/mcp", "/x?" + "q" * 8193],
)
def test_encoded_paths_absolute_targets_and_long_queries_are_refused(target: str) -> None:
    assert refused(headers(("Host", ISSUER)), target, ISSUER) is True


def test_the_forwarded_header_is_ignored() -> None:
    found = headers(("Host", ISSUER), ("Forwarded", "host=attacker.example;proto=http"))
    assert refused(found, "/healthz", ISSUER) is False


def test_a_private_issuer_with_a_port_needs_that_port() -> None:
    assert refused(headers(("Host", "localhost:8443")), "/", "localhost:8443") is False
    assert refused(headers(("Host", "localhost")), "/", "localhost:8443") is True
