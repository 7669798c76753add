"""The stall probe's cases: every operation at each of its input limits, and hostile stored mail.

`seed()` APPENDs the hostile messages straight to the test Dovecot (two fresh folders that no
other test reads); `cases()` lists the probed calls. The bench runs them all; the regression
test runs the ones tagged "heavy" (the heaviest of each kind).
"""

from __future__ import annotations

import base64
import uuid
from dataclasses import dataclass
from typing import Any

from mcp import Client

from support import stall_mail as mail
from support.imap import Append, append_messages, close_session, create_folder, open_session
from support.services import Services
from support.stall_probe import Case, result_code

MIB = 1024 * 1024
MAX_BODY = MIB  # message.text and message.html, UTF-8 bytes
MAX_ATTACHMENT_BYTES = 3 * MIB
MAX_FILTER_BYTES = 1024
PREPARE, QUERY, CREATE, SEND = "mail_prepare", "mail_query", "mail_create", "mail_send_confirmed"

Ref = dict[str, Any]


@dataclass(frozen=True)
class Seeded:
    """References to the stored hostile messages, by name."""

    refs: dict[str, Ref]
    search_folder: str


STORED = {
    "deep_nesting": mail.deep_nesting,
    "many_parts": mail.many_parts,
    "header_flood": mail.header_flood,
    "html_lt": mail.html_only(b"<a"),
    "html_tokens": mail.html_only(b"<p>x"),
    "html_comment": mail.html_only(b"<!--x"),
    "html_entities": mail.html_only(b"&amp;&#x20ac;&bogus;&#"),
    "long_line": mail.long_line,
    "base64_text": mail.base64_text,
    "attachments": mail.attachments,
    "reply_source": mail.reply_source,
}
SEARCH_FLOOD = 100


def heavy_names() -> list[str]:
    """Name the heaviest case of each kind (no mailbox needed: references are stand-ins)."""
    stand_in = {"folder": "INBOX", "uid_validity": 1, "uid": 1}
    names = [*STORED, "draft", "anchor"]
    seeded = Seeded({name: stand_in for name in names}, "INBOX")
    return [case.name for case in cases(seeded) if case.heavy]


async def seed(services: Services) -> Seeded:
    """APPEND the hostile messages (two fresh folders) and return their references."""
    imap = await open_session(services, command_timeout=120)
    try:
        folder = await create_folder(imap, "stall")
        names = [*STORED, "draft"]
        messages = [Append(build()) for build in STORED.values()]
        messages.append(Append(mail.stored_draft(b"<p>draft <b>html</b></p>", 600 * 1024),
                               flags=("\\Draft",)))  # fmt: skip
        stored = await append_messages(imap, folder, messages)
        refs = {
            name: {"folder": folder, "uid_validity": stored.uidvalidity, "uid": uid}
            for name, uid in zip(names, stored.uids, strict=True)
        }
        search_folder = await create_folder(imap, "stall-search")
        anchor_id = f"<anchor-{uuid.uuid4().hex}@example.test>".encode()
        flood = [Append(mail.summary_flood(anchor_id)) for _ in range(SEARCH_FLOOD)]
        found = await append_messages(imap, search_folder, [Append(mail.anchor(anchor_id)), *flood])
        refs["anchor"] = {
            "folder": search_folder, "uid_validity": found.uidvalidity, "uid": found.uids[0]
        }  # fmt: skip
        return Seeded(refs, search_folder)
    finally:
        await close_session(imap)


async def drop(services: Services, seeded: Seeded) -> None:
    """Delete the two folders `seed()` created."""
    imap = await open_session(services, command_timeout=120)
    try:
        for folder in {seeded.refs["draft"]["folder"], seeded.search_folder}:
            await imap.delete(f'"{folder}"')
    finally:
        await close_session(imap)


def fixed(arguments: dict[str, Any]) -> Any:
    """Arguments known in advance."""

    async def build(client: Client) -> dict[str, Any]:
        return arguments

    return build


def new(**message: Any) -> Any:
    """mail_prepare new to one recipient, with `message` on top."""
    return fixed({"action": "new", "message": {"to": ["stall@example.test"], **message}})


def source(action: str, reference: Ref, **message: Any) -> Any:
    """mail_prepare reply, reply_all or forward of a stored message; forward options apart."""
    options = {key: message.pop(key) for key in ("attachment_indexes", "original_mode")
               if key in message}  # fmt: skip
    return fixed({"action": action, "reference": reference, "message": message, **options})


def references() -> list[str]:
    """One hundred Message-IDs, 8 KiB joined: the references limit."""
    return [f"<{n}-{'r' * 60}@example.test>" for n in range(100)]


def files(total: int = MAX_ATTACHMENT_BYTES, count: int = 20) -> list[dict[str, str]]:
    """`count` attachments of `total` bytes together, as the caller sends them."""
    data = base64.b64encode(bytes(range(256)) * (total // count // 256)).decode("ascii")
    return [
        {"filename": f"file-{n}.bin", "content_type": "application/octet-stream",
         "data_base64": data}
        for n in range(count)
    ]  # fmt: skip


def recipients() -> list[str]:
    """Fifty recipients at the 512-byte name+address limit, names needing RFC 2047 B words."""
    return [
        f'"Nöme, {"é" * 240}" <r{n:02d}-{uuid.uuid4().hex[:6]}@example.test>' for n in range(50)
    ]


def commented_recipients() -> list[str]:
    """Fifty valid 2,048-byte entries: a long comment, then the address (all parsed)."""
    return [f"({'x ' * 1010}) <c{n:02d}-{uuid.uuid4().hex[:6]}@example.test>"[-2048:]
            for n in range(50)]  # fmt: skip


def hostile_recipients() -> list[str]:
    """Fifty 2,048-byte entries shaped to hurt an address parser (all refused)."""
    shapes = ["(" * 2040 + "a@b.c", '"\\' * 1020 + "<a@b.c>", "=?utf-8?q?=41?= " * 127 + "<x@y.z>",
              "a" + ".a" * 1020 + "@b", "<" * 2040 + "a@b.c>", "@" * 2047, "a," * 1024,
              '"".' * 680 + "a@b", "\\" * 2040 + "<a@b>", "a " * 1020 + "<a@b>"]  # fmt: skip
    return [shapes[n % len(shapes)][:2048] for n in range(50)]


def html(pattern: str, size: int) -> str:
    """`pattern` repeated up to `size` bytes."""
    return pattern * (size // len(pattern.encode()))


def read(seeded: Seeded, name: str, **extra: Any) -> Any:
    """mail_query read (detail full) of one stored message."""
    return fixed({"action": "read", "reference": seeded.refs[name], "detail": "full", **extra})


def search(seeded: Seeded, **filters: Any) -> Any:
    """mail_query search of the summary-flood folder, 100 rows."""
    arguments = {"folder": seeded.search_folder, "limit": 100, **filters}
    return fixed({"action": "search", "search": arguments, "detail": "full"})


def draft_digest(seeded: Seeded) -> Any:
    """Build arguments needing the stored draft's source_digest (one mail_query draft first)."""

    def with_digest(**arguments: Any) -> Any:
        async def build(client: Client) -> dict[str, Any]:
            result = await client.call_tool(
                "mail_query", {"action": "draft", "reference": seeded.refs["draft"]}
            )
            digest = (result.structured_content or {}).get("source_digest", "0" * 64)
            return {"reference": seeded.refs["draft"], "source_digest": digest, **arguments}

        return build

    return with_digest


def send_largest() -> Any:
    """Prepare the largest message (setup, not measured), then confirm it."""

    async def build(client: Client) -> dict[str, Any]:
        prepared = await client.call_tool(
            "mail_prepare",
            {"action": "new", "message": {
                "to": [f"send-{uuid.uuid4().hex[:8]}@example.test"], "subject": "largest",
                "text": "see the files", "attachments": files()}},
        )  # fmt: skip
        preview = prepared.structured_content or {}
        assert "ok" == result_code(preview, prepared.is_error), preview
        return {"prepared_id": preview["prepared_id"], "confirmed_digest": preview["digest"],
                "append_sent": False}  # fmt: skip

    return build


def cases(seeded: Seeded, html_bytes: int = MAX_BODY) -> list[Case]:
    """Every probed call; `html_bytes` shrinks only the authored-HTML cases."""
    return [
        *first_calls(seeded),
        *compose_cases(seeded, html_bytes),
        *read_cases(seeded),
        *search_cases(seeded),
        *draft_cases(seeded, html_bytes),
        Case("send", "send the largest prepared message", SEND, send_largest(), heavy=True),
    ]


def first_calls(seeded: Seeded) -> list[Case]:
    """Small first calls of a fresh server: what it initializes on first use counts too."""
    small = {"action": "search", "search": {"folder": seeded.search_folder, "limit": 1}}
    return [
        Case("first", "first prepare new (small)", PREPARE, new(text="first"), heavy=True),
        Case("first", "first read (small)", QUERY, read(seeded, "anchor"), heavy=True),
        Case("first", "first search (1 row)", QUERY, fixed(small), heavy=True),
        Case("first", "first create draft (small)", CREATE,
             fixed({"action": "draft", "message": {"text": "first"}}), heavy=True),
    ]  # fmt: skip


def compose_cases(seeded: Seeded, html_bytes: int) -> list[Case]:
    """mail_prepare new, reply, reply_all and forward at their input limits."""
    refs = seeded.refs
    quoted = '"' * (MAX_BODY - 64)  # doubles in JSON: the largest body the transport accepts
    many = {"to": recipients(), "subject": "€" * 170, "text": "x", "references": references()}
    return [
        Case("compose", "prepare new, html '<a' x 1 MiB (plain derived)", PREPARE,
             new(html=html("<a", html_bytes)), heavy=True),
        Case("compose", "prepare new, html '<p>x' x 1 MiB", PREPARE,
             new(html=html("<p>x", html_bytes))),
        Case("compose", "prepare new, html unterminated comment 1 MiB", PREPARE,
             new(html="<!--" + html("x", html_bytes - 4))),
        Case("compose", "prepare new, html 512 nested divs + entities 1 MiB", PREPARE,
             new(html="<div>" * 512 + html("&amp;&#x20ac;&bogus;", html_bytes - 2560))),
        Case("compose", "prepare new, text 1 MiB of LF", PREPARE, new(text="\n" * MAX_BODY),
             heavy=True),
        Case("compose", "prepare new, text 1 MiB one line non-ASCII", PREPARE,
             new(text="é" * (MAX_BODY // 2))),
        Case("compose", "prepare new, 20 attachments 3 MiB", PREPARE,
             new(text="files", attachments=files()), heavy=True),
        Case("compose", "prepare new, 50 recipients 512 B, subject 512 B, 100 references",
             PREPARE, fixed({"action": "new", "message": many})),
        Case("compose", "prepare new, 50 recipients of 2 KiB (comments)", PREPARE,
             new(to=commented_recipients(), text="x"), heavy=True),
        Case("compose", "prepare new, 50 hostile 2 KiB recipients", PREPARE,
             new(to=hostile_recipients(), text="x"), "invalid_arguments"),
        Case("json", "prepare new, ~8 MiB JSON (3 MiB files + escaped text/html)", PREPARE,
             new(text=quoted, html=quoted[: MAX_BODY // 2], attachments=files()),
             "invalid_arguments", heavy=True),
        Case("compose", "prepare reply to 190 KiB of lines (text and html quoted)", PREPARE,
             source("reply", refs["reply_source"], text="reply", html="<p>reply</p>"),
             heavy=True),
        Case("compose", "prepare reply_all to the header flood", PREPARE,
             source("reply_all", refs["header_flood"], text="reply", to=["x@example.test"]),
             "invalid_arguments"),  # the derived "Re:" subject is over 512 bytes
        Case("compose", "prepare forward with the 2 MiB source file", PREPARE,
             source("forward", refs["attachments"], to=["f@example.test"],
                    attachment_indexes=[1])),
        Case("compose", "prepare forward of 5 MiB as eml", PREPARE,
             source("forward", refs["attachments"], to=["f@example.test"],
                    original_mode="eml"), "invalid_arguments"),
    ]  # fmt: skip


def read_cases(seeded: Seeded) -> list[Case]:
    """read of every hostile message, read_many at its budget, the largest attachment."""
    refs = seeded.refs
    heavy = ("header_flood", "html_lt", "many_parts")
    batch = {"action": "read_many", "detail": "full", "max_response_bytes": 131072,
             "references": [refs[name] for name in list(STORED)[:10]]}  # fmt: skip
    attachment = {"action": "attachment", "reference": refs["attachments"], "index": 1}
    return [
        *[Case("read", f"read {name}", QUERY, read(seeded, name), heavy=name in heavy)
          for name in STORED],
        Case("read", "read_many 10 hostile, budget 128 KiB", QUERY, fixed(batch), heavy=True),
        Case("read", "attachment 2 MiB", QUERY, fixed(attachment), heavy=True),
    ]  # fmt: skip


def search_cases(seeded: Seeded) -> list[Case]:
    """search, triage and conversation over 100 messages with 64 KiB summary headers."""
    filters = {key: "ü" * (MAX_FILTER_BYTES // 2) for key in ("query", "from", "to", "subject")}
    filters |= {"participant": "ü" * 512, "message_id": "<" + "m" * 1000 + "@x>"}
    triage = {"action": "triage", "search": {"folder": seeded.search_folder, "limit": 100}}
    thread = {"action": "conversation", "reference": seeded.refs["anchor"],
              "search": {"limit": 100}}  # fmt: skip
    return [
        Case("search", "search 100 summaries of 64 KiB headers", QUERY, search(seeded),
             heavy=True),
        Case("search", "search with every filter at 1 KiB", QUERY, search(seeded, **filters)),
        Case("search", "triage 100 summaries of 64 KiB headers", QUERY, fixed(triage)),
        Case("search", "conversation of 100 long-References messages", QUERY, fixed(thread),
             heavy=True),
    ]  # fmt: skip


def draft_cases(seeded: Seeded, html_bytes: int) -> list[Case]:
    """mail_create draft and revise_draft, mail_query draft, mail_prepare draft."""
    digest = draft_digest(seeded)
    markup = {"action": "draft", "message": {"html": html("<p>x", html_bytes)}}
    heavy_files = {"action": "draft", "message": {"text": "files", "attachments": files()}}
    return [
        Case("drafts", "create draft, html '<p>x' x 1 MiB", CREATE, fixed(markup), heavy=True),
        Case("drafts", "create draft, 20 attachments 3 MiB", CREATE, fixed(heavy_files)),
        Case("drafts", "query draft (600 KiB)", QUERY,
             fixed({"action": "draft", "reference": seeded.refs["draft"]})),
        Case("drafts", "revise draft (600 KiB)", CREATE,
             digest(action="revise_draft", changes={"subject": "revised"}), heavy=True),
        Case("drafts", "prepare draft (600 KiB)", PREPARE, digest(action="draft")),
    ]  # fmt: skip
