"""The Graph side of test_graph_fault_matrix.py: the deployment whose pinned hosts lead to this
run's doubles, what the Graph double received for a row (counted by the row's own recipient or
Message-ID), the sends that hold both of the Graph submitter's slots while a queued row waits,
and the wait for recovery's search of Sent Items.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import email.parser
import email.policy
import json
from pathlib import Path
from typing import Any, NamedTuple

from faults.harness import FAST, Server, confirm, prepare
from faults.matrix import Fleet

from ledger.store.ledger_store import LedgerStore
from support.graph_deploy import GraphRig
from support.graph_double import GRAPH_HOST, Delay, Exchange
from support.services import Services

SEND_ROUTE = "/me/sendMail"
SENT_SEARCH_ROUTE = "/me/mailFolders/sentitems/messages"
# How long the double holds the `/me` checks of the two sends that take the Graph submitter's
# two slots, so that a third send must queue; they are never answered to a killed server.
HOLD_S = 8.0


def _mime(exchange: Exchange) -> bytes:
    try:
        return base64.b64decode(exchange.body, validate=True)
    except (binascii.Error, ValueError):
        return b""


def _addressed_to(mime: bytes, rcpt: str) -> bool:
    head = email.parser.BytesParser(policy=email.policy.default).parsebytes(mime, headersonly=True)
    to = head["To"]
    return to is not None and rcpt in [a.addr_spec for a in to.addresses]


def requests_for(double: Any, rcpt: str) -> list[Exchange]:
    return [
        e
        for e in double.exchanges
        if e.method == "POST" and e.route == SEND_ROUTE and _addressed_to(_mime(e), rcpt)
    ]


def queued_for(double: Any, rcpt: str) -> int:
    return sum(1 for mime in double.sent if _addressed_to(mime, rcpt))


def searches_for(double: Any, message_id: str) -> int:
    bare = message_id.strip("<>")
    return sum(
        1
        for e in double.exchanges
        if e.method == "GET"
        and e.route == SENT_SEARCH_ROUTE
        and any(name == "$filter" and bare in value for name, value in e.query)
    )


def route_plan(rig: GraphRig, services: Services, path: Path) -> str:
    """The plan fault_server.py hands to tests/support/pinned_launch.py."""
    routes = [
        [GRAPH_HOST, 443, "127.0.0.1", rig.double.port],
        ["login.microsoftonline.com", 443, "127.0.0.1", rig.endpoint.port],
    ]
    path.write_text(json.dumps({"ca_file": str(services.ca_file), "routes": routes}))
    return str(path)


def graph_env(rig: GraphRig, routes: str) -> dict[str, str]:
    """One microsoft deployment (its own refresh token and namespace) with the FAST timings."""
    return rig.env(
        ANGELOS_LOCAL_SCOPES="mail.read mail.write mail.send",
        TEST_PINNED_ROUTES=routes,
        **FAST,
    )


class Holder(NamedTuple):
    """A send that holds one of the Graph submitter's two slots while a queued row waits."""

    rcpt: str
    preview: dict[str, Any]
    task: asyncio.Task[Any] | None = None

    @property
    def pid(self) -> str:
        """Its prepared_id."""
        return str(self.preview["prepared_id"])


async def _prepare_holders(server: Server, tag: str) -> list[Holder]:
    rcpts = [f"hold{k}-{tag}@example.test" for k in range(2)]
    previews = await asyncio.gather(*(prepare(server.url, r) for r in rcpts))
    return [Holder(r, p) for r, p in zip(rcpts, previews, strict=True)]


def _confirm_task(server: Server, preview: dict[str, Any]) -> asyncio.Task[Any]:
    return asyncio.create_task(confirm(server.url, preview))


async def hold_both_slots(
    double: Any, run: Fleet, queued: list[int], tag: str
) -> dict[int, list[Holder]]:
    """On the server of each queued row, confirm two sends whose `/me` check the double holds
    (HOLD_S): they take both slots. Returns them once every held check reached the double."""
    holders = {n: await _prepare_holders(run.faulty[n], f"{tag}-{n}") for n in queued}
    double.inject("GET", "/me", Delay(HOLD_S, apply=False), times=2 * len(queued))
    for n in queued:
        holders[n] = [h._replace(task=_confirm_task(run.faulty[n], h.preview)) for h in holders[n]]
    everyone = [(run.stores[run.rows[n].mode], h) for n, hs in holders.items() for h in hs]
    await _until_held(double, everyone)
    return holders


async def _until_held(double: Any, everyone: list[tuple[LedgerStore, Holder]]) -> None:
    """Wait until every holder's attempt marker is in the ledger and every held `/me` check
    reached the double: a slot is held from before the marker until its check is answered, so
    a send confirmed next on the same server must queue."""
    for _ in range(600):
        markers = 0
        for store, holder in everyone:
            _, entries = await store.read(holder.pid)
            markers += "smtp_attempt_started" in [e.t for e in entries]
        if markers == len(everyone) and double.in_flight == len(everyone):
            return
        await asyncio.sleep(0.05)
    raise AssertionError("the sends holding both slots never reached their /me check")


async def until_idle(double: Any) -> None:
    """Wait until the double answers nothing (the held `/me` checks are over)."""
    for _ in range(round((HOLD_S + 30) / 0.05)):
        if not double.in_flight:
            return
        await asyncio.sleep(0.05)
    raise AssertionError("the held /me checks never ended")


async def until_searched(store: LedgerStore, pid: str) -> None:
    """Wait until recovery searched Sent Items for a send it made unknown (others: at once).

    A send joins the evidence work list (scored now) in the same append that makes it unknown;
    a search moves it to its next scheduled search (15 minutes on) or, with a copy found,
    records the evidence and leaves the list.
    """
    for _ in range(100):
        score = await store.client.zscore(store.keys.evidence, pid)
        if score is None or score > await store.server_time_ms() + 60_000:
            return
        await asyncio.sleep(0.3)
    raise AssertionError(f"recovery did not search Sent Items for {pid}")
