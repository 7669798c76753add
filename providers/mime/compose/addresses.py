"""Recipient rules: parse one mailbox, format its header form, de-duplicate To > Cc > Bcc."""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from email import policy
from email.errors import NonASCIILocalPartDefect, ObsoleteHeaderDefect
from typing import Any

from msgspec import Struct

from providers.mime.compose import limits
from providers.mime.compose.encoding import b_words, q_words
from providers.mime.compose.text_rules import (
    has_control,
    is_domain_literal,
    is_dot_atom,
    utf8_length,
)
from schemas.errors import InvalidArguments

# The common entry shapes, read without the stdlib parser (which costs ~90 us per entry):
# addr-spec, <addr-spec>, and a display name of plain atoms or of a quoted string without
# escapes before <addr-spec>, with flat comments around; no encoded words or literals.
_ATEXT = r"[A-Za-z0-9!#$%&'*+/=?^_`{|}~-]"
_DOT_ATOM = rf"{_ATEXT}+(?:\.{_ATEXT}+)*"
_NAME = rf"\"([ !#-\[\]-~]*)\"|({_ATEXT}+(?:[ \t]+{_ATEXT}+)*)"
_CFWS = r"[ \t]*(?:\([^()\\]*\)[ \t]*)*"  # whitespace and comments without nesting or escapes
_ADDR_SPEC = rf"({_DOT_ATOM})@({_DOT_ATOM})"
_SIMPLE_ENTRY = re.compile(rf"{_CFWS}(?:{_ADDR_SPEC}|(?:{_NAME})?[ \t]*<{_ADDR_SPEC}>){_CFWS}")
MAX_LIST_ENTRY_BYTES = 2048
MAX_ENTRY_QUOTED_STRINGS = 16
_LIST_SPECIAL = re.compile(r'["\\(),:;<>\[\]]')
_CLOSING = {'"': '"', "[": "]"}
# A display name with one of these goes into B words (RFC 2047 §5 forbids them in Q phrases).
_B_SPECIALS = frozenset("\"#$%&'(),.:;<>@[]^`{|}~")


class Mailbox(Struct, frozen=True):
    """One recipient: display name (may be "") and bare ASCII address."""

    name: str
    address: str


class Recipients(Struct, frozen=True):
    """Recipients after de-duplication, with the SMTP envelope in To, Cc, Bcc order."""

    to: list[Mailbox]
    cc: list[Mailbox]
    bcc: list[Mailbox]

    @property
    def envelope(self) -> list[str]:
        """Return the bare addresses in To, Cc, Bcc order."""
        return [m.address for m in (*self.to, *self.cc, *self.bcc)]


def ascii_lower(value: str) -> str:
    """Lower-case only A-Z, the comparison the spec asks for addresses."""
    return value.translate(_ASCII_LOWER)


_ASCII_LOWER = str.maketrans("ABCDEFGHIJKLMNOPQRSTUVWXYZ", "abcdefghijklmnopqrstuvwxyz")


def split_list(value: str) -> list[str] | None:
    """Split an address list at its top-level commas, keeping groups whole (linear).

    Quoted strings, nested comments and domain literals (with their quoted pairs) and angle
    addresses are skipped over. Return None when one of them is left open, when a backslash
    stands outside them (a quoted pair is only valid inside), when an entry holds more than
    16 quoted strings, or when it exceeds 2 KiB: the stdlib parser slows quadratically on
    long runs of such tokens, and no usable mailbox needs them. Empty entries are kept, as "".
    """
    entries: list[str] = []
    start = skip_until = depth = strings = 0
    inside = ""  # '"' in a quoted string, "(" in a comment, "[" in a domain literal
    angle = group = False
    for match in _LIST_SPECIAL.finditer(value):
        at = match.start()
        if at < skip_until:
            continue
        ch = value[at]
        if inside:
            if ch == "\\":
                skip_until = at + 2
            elif inside == "(":
                depth += (ch == "(") - (ch == ")")
                inside = "(" if depth else ""
            elif ch == _CLOSING[inside]:
                inside = ""
        elif ch in '"([':
            inside, depth = ch, 1
            strings += ch == '"'
            if strings > MAX_ENTRY_QUOTED_STRINGS:
                return None
        elif ch == "\\":
            return None
        elif ch in "<>":
            angle = ch == "<"
        elif ch == ":" and not angle:
            group = True
        elif ch == ";" and not angle:
            group = False
        elif ch == "," and not (angle or group):
            entries.append(value[start:at])
            start, strings = at + 1, 0
    if inside or angle:
        return None
    entries.append(value[start:])
    if any(len(e.encode("utf-8", "surrogatepass")) > MAX_LIST_ENTRY_BYTES for e in entries):
        return None
    return entries


def simple_entry(piece: str) -> tuple[str, str, str] | None:
    """Read an entry of a common shape as the stdlib would (name, local, domain), else None."""
    match = _SIMPLE_ENTRY.fullmatch(piece)
    if match is None or "=?" in piece:
        return None
    bare_local, bare_domain, quoted, atoms, local, domain = match.groups()
    if bare_local is not None:
        return "", bare_local, bare_domain
    return quoted if quoted is not None else atoms or "", local, domain


def _parse_list(
    value: str, most: int | None = None
) -> tuple[list[tuple[str, str, str]], list[Any], bool] | None:
    """Run the stdlib RFC 5322 parser per entry; return (name, local, domain), defects, groups.

    The entries are split first (split_list) so the parser, slow and quadratic on some long
    inputs (a 64 KiB header of quotes took 45 s), only ever sees one entry of at most 2 KiB.
    With `most`, a list of more entries is refused (None) before any is parsed.
    """
    pieces = split_list(value)
    if pieces is None or (most is not None and sum(map(bool, map(str.strip, pieces))) > most):
        return None
    entries: list[tuple[str, str, str]] = []
    defects: list[Any] = []
    named_group = empty_noted = False
    for index, piece in enumerate(pieces):
        if not piece.strip():
            # An empty list element is obsolete syntax (RFC 5322 §4.4); like the stdlib, a
            # final comma with nothing at all after it is not.
            if len(pieces) > 1 and (piece or index < len(pieces) - 1) and not empty_noted:
                defects.append(ObsoleteHeaderDefect("empty address list element"))
                empty_noted = True  # one is enough: callers only ask whether there are any
            continue
        simple = simple_entry(piece)
        if simple is not None:
            entries.append(simple)
            continue
        try:
            header: Any = policy.default.header_factory("To", piece)
            entries += [(a.display_name, a.username, a.domain) for a in header.addresses]
            named_group = named_group or any(g.display_name is not None for g in header.groups)
            # A non-ASCII local part parses; mailbox_problem then refuses it with a reason.
            defects += [d for d in header.defects if not isinstance(d, NonASCIILocalPartDefect)]
        except Exception:  # the stdlib parser raises assorted errors on hostile input
            return None
    return entries, defects, named_group


def mailbox_problem(mailbox: Mailbox) -> str | None:
    """Say why a mailbox is unusable for composition, or return None when it is fine."""
    address = mailbox.address
    size = utf8_length(mailbox.name)
    if size is None or has_control(mailbox.name):
        return "the display name has control characters or is not valid UTF-8"
    if size + len(address.encode("utf-8", "replace")) > limits.MAX_NAME_AND_ADDRESS_BYTES:
        return "the display name and address exceed 512 bytes"
    if not address.isascii():
        return "the address must be ASCII (SMTPUTF8 is not supported)"
    if any(ch in address for ch in " \t<>"):
        return "the address must not contain spaces or angle brackets"
    local, at, domain = address.rpartition("@")
    if not at:
        return "the address must contain @"
    if not is_dot_atom(local) or not (is_dot_atom(domain) or is_domain_literal(domain)):
        return "the address must be local@domain with a plain (unquoted) local part"
    return None


def parse_entry(entry: str, field: str) -> Mailbox:
    """Parse one caller recipient ("Name <a@b.c>" or "a@b.c"); raise InvalidArguments."""
    size = utf8_length(entry)
    if size is None or size > limits.MAX_RECIPIENT_ENTRY_BYTES:
        raise InvalidArguments(f"{field} must be valid UTF-8 of at most 2048 bytes")
    if has_control(entry):
        raise InvalidArguments(f"{field} must not contain control characters (no CR or LF)")
    parsed = _parse_list(entry, most=1)
    if parsed is None or parsed[1] or parsed[2] or len(parsed[0]) != 1:
        raise InvalidArguments(f"{field} must be exactly one mailbox, e.g. Name <user@example.com>")
    name, local, domain = parsed[0][0]
    # Whitespace runs in a display name carry no meaning and parsers fold them anyway.
    mailbox = Mailbox(" ".join(name.split()), f"{local}@{domain}" if domain else local)
    problem = mailbox_problem(mailbox)
    if problem is not None:
        raise InvalidArguments(f"{field}: {problem}")
    return mailbox


def parse_entries(entries: Sequence[str], field: str) -> list[Mailbox]:
    """Parse a caller recipient list, naming each entry by index in errors."""
    return [parse_entry(entry, f"{field}[{i}]") for i, entry in enumerate(entries)]


def parse_source_list(value: str) -> list[Mailbox] | None:
    """Parse a source address header; None when it is malformed or holds an unusable entry."""
    parsed = _parse_list(value)
    if parsed is None:
        return None
    entries, defects, _ = parsed
    if any(not isinstance(defect, ObsoleteHeaderDefect) for defect in defects):
        return None
    found: list[Mailbox] = []
    for name, local, domain in entries:
        if not local or not domain:
            return None
        mailbox = Mailbox(" ".join(_drop_controls(name).split()), f"{local}@{domain}")
        if mailbox_problem(mailbox) is not None:
            return None
        found.append(mailbox)
    return found


def _drop_controls(value: str) -> str:
    return "".join(" " if has_control(ch) else ch for ch in value)


def header_form(mailbox: Mailbox) -> str:
    """Format a mailbox for a header: `<a>`, `"Name" <a>`, or RFC 2047 words + ` <a>`."""
    bracketed = f"<{mailbox.address}>"
    name = mailbox.name
    if not name:
        return bracketed
    if all(0x20 <= ord(ch) <= 0x7E for ch in name):
        escaped = name.replace("\\", "\\\\").replace('"', '\\"')
        return f'"{escaped}" {bracketed}'
    if any(ch in _B_SPECIALS for ch in name):
        return f"{b_words(name)} {bracketed}"
    return f"{q_words(name, phrase=True)} {bracketed}"


def readable(mailbox: Mailbox) -> str:
    """Format a mailbox for people: `Name <a>` or just `a`."""
    return f"{mailbox.name} <{mailbox.address}>" if mailbox.name else mailbox.address


def dedupe(mailboxes: Iterable[Mailbox], seen: set[str] | None = None) -> list[Mailbox]:
    """Keep the first of each address (ASCII case-insensitive), updating `seen` when given."""
    seen = set() if seen is None else seen
    kept: list[Mailbox] = []
    for mailbox in mailboxes:
        key = ascii_lower(mailbox.address)
        if key not in seen:
            seen.add(key)
            kept.append(mailbox)
    return kept


def normalize(to: Sequence[Mailbox], cc: Sequence[Mailbox], bcc: Sequence[Mailbox]) -> Recipients:
    """De-duplicate across To, then Cc, then Bcc; first spelling and display name win."""
    seen: set[str] = set()
    return Recipients(dedupe(to, seen), dedupe(cc, seen), dedupe(bcc, seen))
