"""Operation modules, one per tool, and the table that routes decoded arguments to them."""

from __future__ import annotations

from schemas.args.query import (
    Attachment,
    Capabilities,
    Conversation,
    Folders,
    Read,
    ReadMany,
    SearchMail,
    Triage,
)
from service.context import Handler
from service.operations import query, read
from service.operations import search as search_ops

HANDLERS: dict[type, Handler] = {
    Capabilities: query.capabilities,
    Folders: query.folders,
    SearchMail: search_ops.search,
    Triage: search_ops.triage,
    Conversation: search_ops.conversation,
    Read: read.read,
    ReadMany: read.read_many,
    Attachment: read.attachment,
}
