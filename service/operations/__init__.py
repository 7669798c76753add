"""Operation modules, one per tool, and the table that routes decoded arguments to them."""

from __future__ import annotations

from schemas.args.query import Capabilities, Folders
from service.context import Handler
from service.operations import query

HANDLERS: dict[type, Handler] = {
    Capabilities: query.capabilities,
    Folders: query.folders,
}
