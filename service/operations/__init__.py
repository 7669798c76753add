"""Operation modules, one per tool, and the table that routes decoded arguments to them."""

from __future__ import annotations

from schemas.args.query import Capabilities, Conversation, Folders, SearchMail, Triage
from service.context import Handler
from service.operations import query
from service.operations import search as search_ops

HANDLERS: dict[type, Handler] = {
    Capabilities: query.capabilities,
    Folders: query.folders,
    SearchMail: search_ops.search,
    Triage: search_ops.triage,
    Conversation: search_ops.conversation,
}
