"""Destination vetting, TLS settings and connect timeouts."""

from __future__ import annotations

import asyncio
import ipaddress
import socket
import ssl
import time
from collections.abc import AsyncIterator

import pytest

from providers.imap.connect import connect
from providers.imap.settings import ImapSettings
from providers.netsafety import (
    dial,
    is_dialable_private_address,
    is_public_address,
    resolve_destination,
    tls_context,
)
from schemas.errors import ServiceUnavailable
from schemas.secret import Secret


class TestPublicAddresses:
    @pytest.mark.parametrize(
        "address", ["8.8.8.8", "1.1.1.1", "2606:4700:4700::1111", "::ffff:8.8.8.8"]
    )
    def test_public_unicast_is_allowed(self, address: str) -> None:
        assert is_public_address(ipaddress.ip_address(address))

    @pytest.mark.parametrize(
        "address",
        [
            "0.0.0.0",
            "10.1.2.3",
            "100.64.0.1",
            "127.0.0.1",
            "169.254.1.1",
            "172.16.0.1",
            "192.0.0.8",
            "192.0.2.1",
            "192.88.99.1",
            "192.168.1.1",
            "198.18.0.1",
            "198.51.100.1",
            "203.0.113.1",
            "224.0.0.1",
            "239.1.1.1",
            "240.0.0.1",
            "255.255.255.255",
            "::",
            "::1",
            "fe80::1",
            "fc00::1",
            "ff02::1",
            "2001::1",
            "2001:db8::1",
            "2002::1",
            "3fff::1",
            "64:ff9b::7f00:1",
            "::ffff:127.0.0.1",
            "fe80::1%2",
        ],
    )
    def test_non_public_destinations_are_refused(self, address: str) -> None:
        assert not is_public_address(ipaddress.ip_address(address))

    @pytest.mark.parametrize("address", ["127.0.0.1", "::1", "10.0.0.1", "fd00::1"])
    def test_private_hosts_switch_allows_loopback_and_private(self, address: str) -> None:
        assert is_dialable_private_address(ipaddress.ip_address(address))

    @pytest.mark.parametrize("address", ["0.0.0.0", "224.0.0.1", "255.255.255.255", "::"])
    def test_private_hosts_switch_still_refuses_unspecified_and_multicast(
        self, address: str
    ) -> None:
        assert not is_dialable_private_address(ipaddress.ip_address(address))


class TestResolve:
    async def test_loopback_is_refused_without_the_private_hosts_switch(self) -> None:
        with pytest.raises(ServiceUnavailable):
            await resolve_destination("localhost", 993, allow_private_hosts=False)

    async def test_loopback_is_returned_numerically_with_the_switch(self) -> None:
        answers = await resolve_destination("127.0.0.1", 993, allow_private_hosts=True)
        assert [sockaddr[:2] for _, sockaddr in answers] == [("127.0.0.1", 993)]

    async def test_a_name_that_does_not_resolve_is_refused(self) -> None:
        with pytest.raises(ServiceUnavailable):
            await resolve_destination("no-such-host.invalid", 993, allow_private_hosts=True)


class TestDial:
    async def test_a_dialled_socket_sends_small_writes_at_once(self) -> None:
        """TCP_NODELAY: a short write after a long one must not wait for the peer's ACK."""
        server = await asyncio.start_server(lambda r, w: w.close(), "127.0.0.1", 0)
        port = server.sockets[0].getsockname()[1]
        try:
            answers = await resolve_destination("127.0.0.1", port, allow_private_hosts=True)
            sock = await dial(answers)
            assert sock is not None
            with sock:
                assert 0 != sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY)
                assert socket.IPPROTO_TCP == sock.proto
        finally:
            server.close()


class TestTls:
    def test_context_requires_tls_1_2_and_verifies_the_host_name(self) -> None:
        context = tls_context(None)
        assert context.minimum_version == ssl.TLSVersion.TLSv1_2
        assert context.check_hostname
        assert context.verify_mode == ssl.CERT_REQUIRED


@pytest.fixture
async def silent_port() -> AsyncIterator[int]:
    """A loopback listener that accepts connections and never sends a byte."""
    held: list[asyncio.StreamWriter] = []

    async def hold(_: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        held.append(writer)

    server = await asyncio.start_server(hold, "127.0.0.1", 0)
    yield server.sockets[0].getsockname()[1]
    for writer in held:
        writer.close()
    server.close()
    await server.wait_closed()


class TestTimeouts:
    async def test_a_peer_that_never_speaks_fails_within_the_timeout(
        self, silent_port: int
    ) -> None:
        settings = ImapSettings(
            host="127.0.0.1",
            port=silent_port,
            username="u",
            password=Secret("p"),
            allow_private_hosts=True,
            timeout_s=0.3,
        )
        started = time.monotonic()
        with pytest.raises(ServiceUnavailable):
            await connect(settings)
        assert time.monotonic() - started < 2.0

    async def test_a_refused_port_is_service_unavailable(self, silent_port: int) -> None:
        settings = ImapSettings(
            host="127.0.0.1",
            port=1,
            username="u",
            password=Secret("p"),
            allow_private_hosts=True,
            timeout_s=2.0,
        )
        with pytest.raises(ServiceUnavailable):
            await connect(settings)

    async def test_an_unreadable_ca_file_is_service_unavailable(self) -> None:
        settings = ImapSettings(
            host="127.0.0.1",
            port=1,
            username="u",
            password=Secret("p"),
            ca_file="/nonexistent/ca.pem",
            allow_private_hosts=True,
        )
        with pytest.raises(ServiceUnavailable):
            await connect(settings)
