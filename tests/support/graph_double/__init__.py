"""A contract double of Microsoft Graph: it tests angelos against our model of Graph, shaped after
Microsoft's docs and checked against msgraph-sdk's models, not against Microsoft.

`graph_double(services)` serves the mail endpoints angelos uses (/me, mailFolders, messages,
sendMail) over HTTPS on loopback with the test CA's certificate for graph.microsoft.com, and
reroutes that pinned host there through the product's test seam. The mailbox state lives in the
real Dovecot of scripts/test-services (the Graph user, dana@example.test), so every change can be
checked over IMAP. Ids are Dovecot's own stable ids wrapped to look like Graph's (ids.py says
how). A test controls tokens, identity, paging and faults, and reads every exchange;
`check_against_sdk` has msgraph-sdk's own models and request builders referee the exchanges.
"""

from support.graph_double.app import ACCOUNT_ID, GRAPH_HOST, GraphDouble, Identity, graph_double
from support.graph_double.contract import SdkReport, SdkUnavailable, check_against_sdk
from support.graph_double.faults import ApplyThenStatus, Delay, Drop, Exchange, Fault, Status

__all__ = [
    "ACCOUNT_ID",
    "GRAPH_HOST",
    "ApplyThenStatus",
    "Delay",
    "Drop",
    "Exchange",
    "Fault",
    "GraphDouble",
    "Identity",
    "SdkReport",
    "SdkUnavailable",
    "Status",
    "check_against_sdk",
    "graph_double",
]
