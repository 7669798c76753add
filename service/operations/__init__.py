"""Operation modules, one per tool, and the table that routes decoded arguments to them."""

from __future__ import annotations

from schemas.args.common import Ref
from schemas.args.create import Copy, CreateFolder, ReviseDraft, SaveDraft
from schemas.args.modify import Move, Rename, SetFlags, Trash
from schemas.args.prepare import (
    PrepareDraft,
    PrepareForward,
    PrepareNew,
    PrepareReply,
    PrepareReplyAll,
    SendConfirmed,
)
from schemas.args.query import (
    Attachment,
    Capabilities,
    Conversation,
    Draft,
    Folders,
    Read,
    ReadMany,
    SearchMail,
    SendStatus,
    Triage,
)
from service.context import Handler
from service.operations import create, delete, drafts, modify, prepare, query, read, send
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
    SendStatus: send.send_status,
    PrepareNew: prepare.prepare_new,
    PrepareReply: prepare.prepare_reply,
    PrepareReplyAll: prepare.prepare_reply,
    PrepareForward: prepare.prepare_forward,
    SendConfirmed: send.send_confirmed,
    CreateFolder: create.create_folder,
    Copy: create.copy,
    SetFlags: modify.set_flags,
    Rename: modify.rename,
    Move: modify.move,
    Trash: modify.trash,
    Ref: delete.delete_permanently,
    Draft: drafts.query_draft,
    SaveDraft: drafts.save_draft,
    ReviseDraft: drafts.revise_draft,
    PrepareDraft: drafts.prepare_draft,
}
