"""The endpoints of the contract (E1-E15): what each one reads, changes and answers."""

from __future__ import annotations

import base64
import binascii
import json
import re
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from support.graph_double import odata, shapes
from support.graph_double.errors import bad_request
from support.graph_double.store import Store

if TYPE_CHECKING:
    from support.graph_double.app import GraphDouble

FOLDER_ENTITY = "microsoft.graph.mailFolder"
MESSAGE_ENTITY = "microsoft.graph.message"
BAD_BASE64 = "Invalid base64 string for MIME content."


@dataclass
class Call:
    """One routed request, as its handler sees it."""

    double: GraphDouble
    store: Store
    path: str
    query: list[tuple[str, str]]
    headers: Mapping[str, str]
    body: bytes
    params: dict[str, str]


@dataclass
class Reply:
    """What a handler answers: a JSON body (and the msgraph model it is), raw bytes, or nothing."""

    status: int
    json: dict[str, Any] | None = None
    model: str | None = None
    raw: bytes | None = None
    headers: dict[str, str] = field(default_factory=dict)


Handler = Callable[[Call], Awaitable[Reply]]


@dataclass(frozen=True)
class Route:
    """A method and path (after /v1.0) of the contract, the query options it takes, its handler."""

    method: str
    pattern: re.Pattern[str]
    options: tuple[str, ...]
    handler: Handler


def _json_body(call: Call, allowed: dict[str, type], *, action: bool = False) -> dict[str, Any]:
    kind = call.headers.get("Content-Type", "").split(";")[0].strip().lower()
    if kind != "application/json":
        raise bad_request("This request needs Content-Type: application/json.")
    try:
        body = json.loads(call.body)
    except (UnicodeDecodeError, ValueError):
        raise bad_request("The request body is not valid JSON.") from None
    if not isinstance(body, dict):
        raise bad_request("The request body must be a JSON object.")
    if action:  # Graph reads action parameters without regard to case (DestinationId too)
        names = {n.lower(): n for n in allowed}
        body = {names.get(k.lower(), k): v for k, v in body.items()}
    for name, value in body.items():
        if name not in allowed or not isinstance(value, allowed[name]):
            raise bad_request(f"The member '{name}' is not accepted here.")
    return body


def _mime_body(call: Call) -> bytes:
    kind = call.headers.get("Content-Type", "").split(";")[0].strip().lower()
    if kind != "text/plain":
        raise bad_request("MIME content needs Content-Type: text/plain.")
    try:
        mime = base64.b64decode(re.sub(rb"\s+", b"", call.body), validate=True)
    except (binascii.Error, ValueError):
        mime = b""
    if not mime:
        raise bad_request(BAD_BASE64, "ErrorMimeContentInvalidBase64String")
    return mime


def _page(call: Call, q: odata.Query, count: int) -> tuple[int, int, str | None]:
    size = q.top if call.double.page_cap is None else min(q.top, call.double.page_cap)
    end = q.skip + size
    more = odata.next_link(call.path, call.query, end) if end < count else None
    return q.skip, end, more


async def me(call: Call) -> Reply:
    """E1 GET /me."""
    q = odata.parse_query(call.query, ("$select",), shapes.USER_MEMBERS, "microsoft.graph.user")
    who = call.double.who
    return Reply(200, shapes.user(who.id, who.mail, who.upn, q.select), "User")


async def list_folders(call: Call) -> Reply:
    """E2 GET /me/mailFolders, E3 GET /me/mailFolders/{id}/childFolders."""
    options = ("$top", "$skip", "$select")
    q = odata.parse_query(call.query, options, shapes.FOLDER_MEMBERS, FOLDER_ENTITY)
    parent = call.params.get("folder")
    children = await call.store.children(parent)
    start, end, more = _page(call, q, len(children))
    items = [shapes.folder(f, q.select) for f in children[start:end]]
    tail = "mailFolders" if parent is None else f"mailFolders('{parent}')/childFolders"
    body = shapes.collection(shapes.context(call.double.account_id, tail), items, more)
    return Reply(200, body, "MailFolderCollectionResponse")


def _folder_reply(call: Call, status: int, folder: Any, select: Any = None) -> Reply:
    body = {
        "@odata.context": shapes.context(call.double.account_id, "mailFolders/$entity"),
        **shapes.folder(folder, select),
    }
    return Reply(status, body, "MailFolder")


async def get_folder(call: Call) -> Reply:
    """E4 GET /me/mailFolders/{id}."""
    q = odata.parse_query(call.query, ("$select",), shapes.FOLDER_MEMBERS, FOLDER_ENTITY)
    return _folder_reply(call, 200, await call.store.folder(call.params["folder"]), q.select)


async def create_folder(call: Call) -> Reply:
    """E12 POST /me/mailFolders and /me/mailFolders/{id}/childFolders."""
    body = _json_body(call, {"displayName": str})
    if "displayName" not in body:
        raise bad_request("displayName is required.")
    folder = await call.store.create_folder(call.params.get("folder"), body["displayName"])
    return _folder_reply(call, 201, folder)


async def rename_folder(call: Call) -> Reply:
    """E13 PATCH /me/mailFolders/{id}."""
    body = _json_body(call, {"displayName": str})
    if "displayName" not in body:
        raise bad_request("displayName is required.")
    folder = await call.store.rename_folder(call.params["folder"], body["displayName"])
    return _folder_reply(call, 200, folder)


async def list_messages(call: Call) -> Reply:
    """E5 GET /me/mailFolders/{id}/messages."""
    options = ("$top", "$skip", "$select", "$orderby", "$filter")
    q = odata.parse_query(call.query, options, shapes.MESSAGE_MEMBERS, MESSAGE_ENTITY)
    folder, summaries = await call.store.summaries(call.params["folder"])
    kept = sorted(
        (s for s in summaries if q.keeps(s)),
        key=lambda s: (s.received, s.uid),
        reverse=q.descending,
    )
    start, end, more = _page(call, q, len(kept))
    details = await call.store.details(folder, [s.uid for s in kept[start:end]])
    items = [shapes.message(d, q.select) for d in details]
    tail = f"mailFolders('{call.params['folder']}')/messages"
    body = shapes.collection(shapes.context(call.double.account_id, tail), items, more)
    return Reply(200, body, "MessageCollectionResponse")


def _message_reply(call: Call, status: int, detail: Any, select: Any = None) -> Reply:
    body = {
        "@odata.context": shapes.context(call.double.account_id, "messages/$entity"),
        **shapes.message(detail, select),
    }
    return Reply(status, body, "Message")


async def get_message(call: Call) -> Reply:
    """E6 GET /me/messages/{id}."""
    q = odata.parse_query(call.query, ("$select",), shapes.MESSAGE_MEMBERS, MESSAGE_ENTITY)
    return _message_reply(call, 200, await call.store.message(call.params["message"]), q.select)


async def get_mime(call: Call) -> Reply:
    """E7 GET /me/messages/{id}/$value."""
    return Reply(200, raw=await call.store.raw(call.params["message"]))


async def create_from_mime(call: Call) -> Reply:
    """E8 POST /me/mailFolders/{id}/messages with base64 MIME: a draft in that folder."""
    mime = _mime_body(call)
    detail = await call.store.append(call.params["folder"], mime, ["\\Draft"])
    return _message_reply(call, 201, detail)


async def update_message(call: Call) -> Reply:
    """E9 PATCH /me/messages/{id}: isRead and flag.flagStatus."""
    body = _json_body(call, {"isRead": bool, "flag": dict})
    changes: dict[str, bool] = {}
    if "isRead" in body:
        changes["\\Seen"] = body["isRead"]
    if "flag" in body:
        status = body["flag"].get("flagStatus")
        if set(body["flag"]) != {"flagStatus"} or status not in ("flagged", "notFlagged"):
            raise bad_request('flag must be {"flagStatus": "flagged" | "notFlagged"}.')
        changes["\\Flagged"] = status == "flagged"
    return _message_reply(call, 200, await call.store.set_flags(call.params["message"], changes))


async def copy_or_move(call: Call) -> Reply:
    """E10 POST /me/messages/{id}/copy, E11 POST /me/messages/{id}/move."""
    body = _json_body(call, {"destinationId": str}, action=True)
    if "destinationId" not in body:
        raise bad_request("destinationId is required.")
    act = call.store.move if call.path.endswith("/move") else call.store.copy
    return _message_reply(call, 201, await act(call.params["message"], body["destinationId"]))


async def send_mail(call: Call) -> Reply:
    """E14 POST /me/sendMail with base64 MIME: filed in Sent Items, kept in double.sent."""
    mime = _mime_body(call)
    await call.store.append("sentitems", mime, ["\\Seen"])
    call.double.sent.append(mime)
    return Reply(202)


async def delete_message(call: Call) -> Reply:
    """E15 DELETE /me/messages/{id}."""
    await call.store.delete(call.params["message"])
    return Reply(204)


FOLDER = r"/me/mailFolders/(?P<folder>[^/]+)"
MESSAGE = r"/me/messages/(?P<message>[^/]+)"
PAGED = ("$top", "$skip", "$select")
ROUTES = tuple(
    Route(method, re.compile(pattern), options, handler)
    for method, pattern, options, handler in (
        ("GET", r"/me", ("$select",), me),
        ("GET", r"/me/mailFolders", PAGED, list_folders),
        ("POST", r"/me/mailFolders", (), create_folder),
        ("GET", FOLDER, ("$select",), get_folder),
        ("PATCH", FOLDER, (), rename_folder),
        ("GET", FOLDER + "/childFolders", PAGED, list_folders),
        ("POST", FOLDER + "/childFolders", (), create_folder),
        ("GET", FOLDER + "/messages", (*PAGED, "$orderby", "$filter"), list_messages),
        ("POST", FOLDER + "/messages", (), create_from_mime),
        ("GET", MESSAGE, ("$select",), get_message),
        ("PATCH", MESSAGE, (), update_message),
        ("DELETE", MESSAGE, (), delete_message),
        ("GET", MESSAGE + r"/\$value", (), get_mime),
        ("POST", MESSAGE + "/copy", (), copy_or_move),
        ("POST", MESSAGE + "/move", (), copy_or_move),
        ("POST", r"/me/sendMail", (), send_mail),
    )
)


def find_route(method: str, route: str) -> tuple[Route, dict[str, str]] | None:
    """The contract's route for this request, and the ids in its path; None off the contract."""
    for r in ROUTES:
        m = r.pattern.fullmatch(route)
        if m and r.method == method.upper():
            return r, m.groupdict()
    return None
