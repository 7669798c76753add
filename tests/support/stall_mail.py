"""Hostile stored messages for the event-loop stall probe, each at or past a read limit.

Every builder returns raw CRLF bytes of at most `size` bytes (the 5 MiB read limit by default);
they are APPENDed straight to the test Dovecot, never through the server under test.
"""

from __future__ import annotations

import base64
import uuid
from collections.abc import Callable

MIB = 1024 * 1024
READ_LIMIT = 5 * MIB
HEADER_LIMIT = 64 * 1024
SENDER = "alice@example.test"  # the configured MAIL_FROM of scripts/test-services


def _id() -> bytes:
    return f"<stall-{uuid.uuid4().hex}@example.test>".encode()


def b64_lines(data: bytes) -> bytes:
    """Base64 in 76-character CRLF lines (bare LF would grow by a byte a line once stored)."""
    return base64.encodebytes(data).replace(b"\n", b"\r\n")


def head(subject: bytes, *fields: bytes, sender: str = "Stall Probe <stall@example.test>") -> bytes:
    """A plain root header block (without the blank line) plus extra CRLF-terminated fields."""
    return (
        b"From: " + sender.encode() + b"\r\nTo: alice@example.test\r\nSubject: " + subject
        + b"\r\nDate: Mon, 05 Jan 2026 10:00:00 +0000\r\nMessage-ID: " + _id()
        + b"\r\nMIME-Version: 1.0\r\n" + b"".join(fields)
    )  # fmt: skip


def _fill(unit: bytes, size: int) -> bytes:
    return unit * max(1, size // len(unit))


def deep_nesting(size: int = READ_LIMIT) -> bytes:
    """Sixty nested multipart/mixed levels (the walk stops at 12), each with a text part."""
    levels = 60
    filler = _fill(b"nested filler text line for the stall probe\r\n", (size - 64 * 1024) // levels)
    out = [head(b"deep nesting", b'Content-Type: multipart/mixed; boundary="n0"\r\n'), b"\r\n"]
    for level in range(levels):
        out += [b"--n%d\r\nContent-Type: text/plain\r\n\r\n" % level, filler]
        out.append(
            b'--n%d\r\nContent-Type: multipart/mixed; boundary="n%d"\r\n\r\n' % (level, level + 1)
        )
    out.append(
        b"--n%d\r\nContent-Type: text/plain\r\n\r\ninnermost\r\n--n%d--\r\n" % (levels, levels)
    )
    out += [b"--n%d--\r\n" % level for level in reversed(range(levels))]
    return b"".join(out)


def many_parts(size: int = READ_LIMIT) -> bytes:
    """Four hundred parts (the walk stops at 100): text and base64 attachments alternating."""
    count = 400
    share = (size - 64 * 1024) // count
    text = _fill(b"part text line for the stall probe\r\n", share)
    data = b64_lines(bytes(range(256)) * (share * 57 // 78 // 256))
    out = [head(b"many parts", b'Content-Type: multipart/mixed; boundary="p"\r\n'), b"\r\n"]
    for n in range(count):
        if n % 2:
            out += [b'--p\r\nContent-Type: application/octet-stream; name="f%d.bin"\r\n' % n,
                    b"Content-Transfer-Encoding: base64\r\n\r\n", data]  # fmt: skip
        else:
            out += [b"--p\r\nContent-Type: text/plain; charset=utf-8\r\n\r\n", text]
    out.append(b"--p--\r\n")
    return b"".join(out)


def _flood_fields(size: int) -> bytes:
    """Short header fields up to `size` bytes: the most lines a header block limit admits."""
    return _fill(b"X-F: v\r\n", size)


def header_flood(size: int = READ_LIMIT) -> bytes:
    """A 64 KiB root header of RFC 2047 words, address lists and comments, then 80 parts
    whose header blocks are each just under 64 KiB of one-letter fields."""
    subject = b" ".join([b"=?utf-8?q?=E2=82=AC_stall?="] * 600)
    sender = b", ".join([b'"Name, with comma" <a@example.test>'] * 400)
    comments = b"x@example.test " + b"(" * 2000 + b"c" + b")" * 2000
    top = head(subject, b"Cc: " + sender + b"\r\nReply-To: " + comments + b"\r\n")
    top += b'Content-Type: multipart/mixed; boundary="h"\r\n'
    top += _flood_fields(HEADER_LIMIT - 1024 - len(top))
    fields = _flood_fields(HEADER_LIMIT - 1024)
    parts = min(80, (size - len(top)) // (len(fields) + 64))
    out = [top, b"\r\n"]
    for _ in range(parts):
        out += [b"--h\r\nContent-Type: text/plain\r\n", fields, b"\r\nbody\r\n"]
    out.append(b"--h--\r\n")
    return b"".join(out)


def html_only(pattern: bytes, size: int = READ_LIMIT) -> Callable[[], bytes]:
    """A text/html-only message repeating `pattern` up to `size` bytes."""

    def build() -> bytes:
        top = head(b"html only", b"Content-Type: text/html; charset=utf-8\r\n") + b"\r\n"
        return top + _fill(pattern, size - len(top) - 2) + b"\r\n"

    return build


def long_line(size: int = READ_LIMIT) -> bytes:
    """One 8bit text/plain line of almost `size` bytes, no line break."""
    top = head(b"one long line", b"Content-Type: text/plain; charset=utf-8\r\n")
    top += b"Content-Transfer-Encoding: 8bit\r\n\r\n"
    return top + b"x" * (size - len(top) - 2) + b"\r\n"


def reply_source(size: int = READ_LIMIT) -> bytes:
    """A message a reply may quote whole: 190 KiB of empty lines (each quoted as ">", and as
    "<br>" in HTML), then a base64 attachment filling up to `size`."""
    data = bytes(range(256)) * ((size - 448 * 1024) * 57 // 78 // 256)
    out = [head(b"reply source", b'Content-Type: multipart/mixed; boundary="r"\r\n'), b"\r\n"]
    out += [b"--r\r\nContent-Type: text/plain\r\n\r\n", b"\r\n" * (190 * 1024), b"end\r\n"]
    out += [b"--r\r\nContent-Type: application/octet-stream\r\n",
            b"Content-Transfer-Encoding: base64\r\n\r\n", b64_lines(data)]  # fmt: skip
    out.append(b"--r--\r\n")
    return b"".join(out)


def base64_text(size: int = READ_LIMIT) -> bytes:
    """A base64 text/plain body full of characters outside the alphabet (lenient decoding)."""
    top = head(b"base64 text", b"Content-Type: text/plain; charset=utf-8\r\n")
    top += b"Content-Transfer-Encoding: base64\r\n\r\n"
    return top + _fill(b"QUJD!!!!*&^%$#@\r\n", size - len(top))


def attachments(size: int = READ_LIMIT) -> bytes:
    """A short text and two base64 attachments (2 MiB, then the rest), within `size`."""
    first = bytes(range(256)) * (2 * MIB // 256)
    # b64_lines writes 78 bytes (76 and CRLF) per 57 input bytes.
    second = bytes(range(256)) * ((size - 64 * 1024) * 57 // 78 // 256 - len(first) // 256)
    out = [head(b"attachments", b'Content-Type: multipart/mixed; boundary="a"\r\n'), b"\r\n"]
    out.append(b"--a\r\nContent-Type: text/plain\r\n\r\nsee the files\r\n")
    for n, data in enumerate((first, second), start=1):
        out += [b'--a\r\nContent-Type: application/octet-stream\r\n',
                b'Content-Disposition: attachment; filename="f%d.bin"\r\n' % n,
                b"Content-Transfer-Encoding: base64\r\n\r\n", b64_lines(data)]  # fmt: skip
    out.append(b"--a--\r\n")
    return b"".join(out)


def summary_flood(anchor_id: bytes) -> bytes:
    """A small message whose Date/From/To/Subject fill a 64 KiB summary section, and whose
    References (60 KiB) link it to `anchor_id` among 99 other long IDs."""
    subject = b" ".join([b"=?utf-8?b?4oKsIHN0YWxsIHByb2Jl?="] * 700)
    people = b", ".join([b'"Last, First (x)" <p@example.test>'] * 250)
    # With its Message-ID the link section holds 100 IDs, the most it may.
    ids = [b"<" + b"r" * 560 + b"-%d@example.test>" % n for n in range(98)]
    references = b" ".join([*ids, anchor_id])
    top = head(subject, b"Cc: " + people + b"\r\nReferences: " + references + b"\r\n")
    top = top.replace(b"To: alice@example.test", b"To: " + people, 1)
    return top + b"Content-Type: text/plain\r\n\r\nsmall body\r\n"


def anchor(anchor_id: bytes) -> bytes:
    """The conversation anchor: a plain message with the given Message-ID."""
    top = head(b"anchor", b"Content-Type: text/plain\r\n")
    start = top.index(b"Message-ID: ") + len(b"Message-ID: ")
    end = top.index(b"\r\n", start)
    return top[:start] + anchor_id + top[end:] + b"\r\nanchor body\r\n"


def stored_draft(html: bytes, size: int) -> bytes:
    """A \\Draft from the configured sender near `size` bytes: plain and HTML alternatives
    (each a quarter, at most 1,000 KiB: a draft body part may not exceed 1 MiB) and one
    attachment with the rest."""
    body = min(size // 4, 1000 * 1024)
    text = _fill(b"draft text line\r\n", body)
    data = b64_lines(bytes(range(256)) * ((size - 2 * body - 64 * 1024) * 57 // 78 // 256))
    top = head(b"stall draft", b'Content-Type: multipart/mixed; boundary="m"\r\n', sender=SENDER)
    return b"".join([
        top, b"\r\n--m\r\nContent-Type: multipart/alternative; boundary=\"t\"\r\n\r\n",
        b"--t\r\nContent-Type: text/plain; charset=utf-8\r\n\r\n", text,
        b"--t\r\nContent-Type: text/html; charset=utf-8\r\n\r\n", _fill(html, body),
        b"\r\n--t--\r\n--m\r\nContent-Type: application/octet-stream\r\n",
        b'Content-Disposition: attachment; filename="d.bin"\r\n',
        b"Content-Transfer-Encoding: base64\r\n\r\n", data, b"--m--\r\n",
    ])  # fmt: skip
