"""An aiohttp resolver that hands the connector only addresses the outbound rules vetted.

aiohttp would otherwise resolve a host itself and dial whatever DNS answered; with this resolver
(and `use_dns_cache=False`) every connection goes through `resolve_destination`, which refuses
the whole host when any answer is non-public, so no second lookup can reopen a rebinding window.
"""

from __future__ import annotations

import socket

from aiohttp.abc import AbstractResolver, ResolveResult

from providers.netsafety import resolve_destination


class VettedResolver(AbstractResolver):
    """Resolve once through the outbound rules, so aiohttp dials only vetted addresses."""

    def __init__(self, allow_private_hosts: bool) -> None:
        self.allow_private_hosts = allow_private_hosts

    async def resolve(
        self, host: str, port: int = 0, family: socket.AddressFamily = socket.AF_INET
    ) -> list[ResolveResult]:
        """Return the vetted addresses of `host` as numeric answers for the connector."""
        answers = await resolve_destination(
            host, port, allow_private_hosts=self.allow_private_hosts
        )
        return [
            ResolveResult(
                hostname=host,
                host=str(sockaddr[0]),
                # The answer's own port: the same as asked, except where the test seam sends a
                # pinned destination to a loopback listener.
                port=int(sockaddr[1]),
                family=found_family,
                proto=socket.IPPROTO_TCP,
                flags=socket.AI_NUMERICHOST,
            )
            for found_family, sockaddr in answers
        ]

    async def close(self) -> None:
        """Nothing to release: every lookup is its own."""
        return None
