"""Allowed Host and Origin values come from the bind address, for every loopback spelling."""

from __future__ import annotations

import pytest

from service.transports.host_policy import authority, is_loopback, loopback_policy

LOOPBACK_BINDS = ["127.0.0.1", "127.0.0.2", "127.1.2.3", "localhost", "::1", "0:0:0:0:0:0:0:1"]


class TestAuthority:
    @pytest.mark.parametrize(
        ("value", "expected"),
        [
            ("localhost:8080", ("localhost", 8080)),
            ("LocalHost:8080", ("localhost", 8080)),
            ("127.0.0.2", ("127.0.0.2", 80)),
            ("[::1]:8080", ("::1", 8080)),
            ("[0:0:0:0:0:0:0:1]:8080", ("::1", 8080)),
            ("[::1]", ("::1", 80)),
            ("mail.example.com:65535", ("mail.example.com", 65535)),
        ],
    )
    def test_hosts_and_ports_are_canonical(self, value: str, expected: tuple[str, int]) -> None:
        assert expected == authority(value, 80)

    @pytest.mark.parametrize(
        "value",
        [
            "",
            ":8080",
            "localhost:",
            "localhost:0",
            "localhost:65536",
            "localhost:+80",
            "localhost:80:80",
            "::1:8080",
            "[::1",
            "[::1]x",
            "[127.0.0.1]:80",
            "[fe80::1%25lo]:80",
            "user@localhost:80",
            "localhost/x:80",
            "lo calhost:80",
            "l\u043ecalhost:80",  # a Cyrillic o
        ],
    )
    def test_malformed_values_have_no_authority(self, value: str) -> None:
        assert authority(value, 80) is None

    def test_ipv4_shorthands_stay_names_that_match_no_address(self) -> None:
        assert ("127.1", 80) == authority("127.1", 80)


class TestLoopbackPolicy:
    @pytest.mark.parametrize("bind", LOOPBACK_BINDS)
    def test_every_accepted_loopback_spelling_gets_a_policy(self, bind: str) -> None:
        assert is_loopback(bind)
        policy = loopback_policy(bind, 8080)
        assert policy.allows_host("localhost:8080")
        assert not policy.allows_host("evil.example.com:8080")

    def test_an_ipv4_bind_allows_itself_and_localhost_on_its_port(self) -> None:
        assert {("127.0.0.2", 8080), ("localhost", 8080)} == loopback_policy(
            "127.0.0.2", 8080
        ).authorities

    def test_an_ipv6_bind_in_any_spelling_allows_the_canonical_address(self) -> None:
        assert {("::1", 8080), ("localhost", 8080)} == loopback_policy(
            "0:0:0:0:0:0:0:1", 8080
        ).authorities

    def test_localhost_allows_both_addresses_it_binds(self) -> None:
        assert {("localhost", 8080), ("127.0.0.1", 8080), ("::1", 8080)} == loopback_policy(
            "localhost", 8080
        ).authorities

    @pytest.mark.parametrize("bind", ["0.0.0.0", "::", "192.0.2.1", "mail.example.com"])
    def test_a_non_loopback_bind_has_no_policy(self, bind: str) -> None:
        with pytest.raises(ValueError, match="public resource URL"):
            loopback_policy(bind, 8080)

    def test_another_port_or_address_is_foreign(self) -> None:
        policy = loopback_policy("127.0.0.2", 8080)
        assert [False, False, False, False] == [
            policy.allows_host(h) for h in ("127.0.0.2:8081", "127.0.0.2", "127.0.0.3:8080", None)
        ]


class TestOrigin:
    POLICY = loopback_policy("::1", 8080)

    @pytest.mark.parametrize("origin", [None, "http://[::1]:8080", "http://localhost:8080"])
    def test_no_origin_or_this_servers_origin_is_allowed(self, origin: str | None) -> None:
        assert self.POLICY.allows_origin(origin)

    @pytest.mark.parametrize(
        "origin",
        [
            "null",
            "http://evil.example.com",
            "http://evil.example.com:8080",
            "https://localhost:8080",
            "HTTP://localhost:8080",
            "http://localhost:8081",
            "http://localhost",
            "http://localhost:8080/",
            "file://",
            "localhost:8080",
        ],
    )
    def test_any_other_origin_is_refused(self, origin: str) -> None:
        assert not self.POLICY.allows_origin(origin)
