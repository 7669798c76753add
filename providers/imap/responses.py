"""IMAP responses: grouping, tokenizing, response codes and the parsers of what we send."""

from __future__ import annotations

import re
from collections.abc import Iterator, Sequence
from typing import TypeAlias

from msgspec import Struct, field

from providers.imap.codec import (
    UID_MAX,
    clean_text,
    decode_mutf7,
    folder_name_problem,
    parse_uid_set,
)
from schemas.errors import SafetyLimit, ServiceUnavailable
from schemas.mailbox import Folder


class ImapResponse(Struct, frozen=True):
    """One finished command: tagged status, untagged lines (a literal follows a `{n}` line)."""

    status: str
    text: bytes = b""
    lines: list[bytes] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        """Tell whether the tagged status is OK."""
        return self.status == "OK"


class Atom(str):
    """A bare IMAP token (atom or number), as opposed to a quoted or literal string (bytes)."""


Token: TypeAlias = "Atom | bytes | list[Token] | None"  # None is NIL

_LITERAL_TAIL = re.compile(rb"\{(\d+)\+?\}$")
# An atom's plain run is scanned in C; brackets (section specs) go byte by byte.
_ATOM_PLAIN = re.compile(rb"[^ ()\[\]]*")
# A SEARCH answer is usually one plain line of numbers: split it instead of tokenizing.
_PLAIN_SEARCH = re.compile(rb"SEARCH((?: [0-9]+)*)(?: \(MODSEQ [0-9]+\))?", re.IGNORECASE)


def _malformed() -> ServiceUnavailable:
    return ServiceUnavailable("malformed IMAP response")


def group_responses(lines: Sequence[bytes]) -> list[list[bytes]]:
    """Group response entries into logical responses: text, literal, text, literal, ..., text."""
    groups: list[list[bytes]] = []
    i = 0
    while i < len(lines):
        group = [lines[i]]
        i += 1
        while _LITERAL_TAIL.search(group[-1]) and i < len(lines):
            group.append(lines[i])  # the literal itself
            i += 1
            # aioimaplib drops an empty line, so a response ending in a literal has no
            # continuation entry; a real continuation starts with SP, ")" or "]".
            if i < len(lines) and lines[i][:1] in (b" ", b")", b"]"):
                group.append(lines[i])
                i += 1
            else:
                group.append(b"")
        groups.append(group)
    return groups


def tokenize(segments: Sequence[bytes]) -> list[Token]:
    """Tokenize one logical response (text/literal segments) into atoms, strings, NIL and lists."""
    root: list[Token] = []
    stack: list[list[Token]] = [root]
    for index in range(0, len(segments), 2):
        text = segments[index]
        literal = segments[index + 1] if index + 1 < len(segments) else None
        end = len(text)
        if literal is not None:
            match = _LITERAL_TAIL.search(text)
            if match is None:
                raise _malformed()
            end = match.start()
        _tokenize_text(text, end, stack)
        if literal is not None:
            stack[-1].append(bytes(literal))
    if len(stack) != 1:
        raise _malformed()
    return root


def _tokenize_text(text: bytes, end: int, stack: list[list[Token]]) -> None:
    pos = 0
    while pos < end:
        ch = text[pos]
        if ch == 0x20:
            pos += 1
        elif ch == 0x28:  # (
            child: list[Token] = []
            stack[-1].append(child)
            stack.append(child)
            pos += 1
        elif ch == 0x29:  # )
            if len(stack) == 1:
                raise _malformed()
            stack.pop()
            pos += 1
        elif ch == 0x22:  # "
            value, pos = _read_quoted(text, pos, end)
            stack[-1].append(value)
        else:
            token, pos = _read_atom(text, pos, end)
            stack[-1].append(None if token.upper() == "NIL" else Atom(token))


def _read_quoted(text: bytes, pos: int, end: int) -> tuple[bytes, int]:
    close = text.find(b'"', pos + 1, end)
    if close >= 0 and text.find(b"\\", pos + 1, close) < 0:  # no escapes: one slice
        return text[pos + 1 : close], close + 1
    out = bytearray()
    pos += 1
    while pos < end:
        ch = text[pos]
        if ch == 0x5C:  # backslash
            if pos + 1 >= end:
                break
            out.append(text[pos + 1])
            pos += 2
        elif ch == 0x22:
            return bytes(out), pos + 1
        else:
            out.append(ch)
            pos += 1
    raise _malformed()


def _read_atom(text: bytes, pos: int, end: int) -> tuple[str, int]:
    start = pos
    plain = _ATOM_PLAIN.match(text, pos, end)
    assert plain is not None  # the pattern matches the empty string
    pos = plain.end()
    depth = 0  # brackets may hold spaces and parentheses: BODY[HEADER.FIELDS (SUBJECT)]
    while pos < end:
        ch = text[pos]
        if ch == 0x5B:
            depth += 1
        elif ch == 0x5D:
            depth = max(0, depth - 1)
        elif depth == 0 and ch in (0x20, 0x28, 0x29):
            break
        pos += 1
    try:
        return text[start:pos].decode("ascii"), pos
    except UnicodeDecodeError:
        raise _malformed() from None


def as_text(token: Token) -> str:
    """Return a string-valued token as str (UTF-8), NIL as "NIL"; lists are malformed here."""
    if token is None:
        return "NIL"
    if isinstance(token, Atom):
        return str(token)
    if isinstance(token, bytes):
        try:
            return token.decode("utf-8")
        except UnicodeDecodeError:
            raise _malformed() from None
    raise _malformed()


def as_number(token: Token) -> int:
    """Return a number token as int."""
    if isinstance(token, Atom) and token.isdigit():
        return int(token)
    raise _malformed()


# --- response codes ---------------------------------------------------------------------------


_STATUS_WORDS = (b"OK", b"NO", b"BAD", b"BYE", b"PREAUTH")


def response_code(text: bytes) -> tuple[str, list[Token]] | None:
    """Parse the `[CODE args]` at the start of a status text; None when there is none."""
    if not text.startswith(b"["):
        return None
    depth = 0
    in_quote = False
    pos = 0
    while pos < len(text):
        ch = text[pos]
        if in_quote:
            if ch == 0x5C:
                pos += 1
            elif ch == 0x22:
                in_quote = False
        elif ch == 0x22:
            in_quote = True
        elif ch == 0x5B:
            depth += 1
        elif ch == 0x5D:
            depth -= 1
            if depth == 0:
                break
        pos += 1
    else:
        raise _malformed()
    tokens = tokenize([text[1:pos]])
    if not tokens or not isinstance(tokens[0], Atom):
        raise _malformed()
    return tokens[0].upper(), tokens[1:]


def status_codes(response: ImapResponse) -> Iterator[tuple[str, list[Token]]]:
    """Yield the response codes of untagged OK/NO/BAD lines, then of the tagged status text."""
    for group in group_responses(response.lines):
        head = group[0]
        word, _, rest = head.partition(b" ")
        if len(group) == 1 and word.upper() in _STATUS_WORDS:
            code = response_code(rest)
            if code is not None:
                yield code
    code = response_code(response.text)
    if code is not None:
        yield code


def find_code(response: ImapResponse, name: str) -> list[Token] | None:
    """Return the arguments of the first response code called `name`, or None."""
    for code, args in status_codes(response):
        if code == name:
            return args
    return None


class AppendUid(Struct, frozen=True):
    """APPENDUID (RFC 4315): the destination UIDVALIDITY and the new UIDs."""

    uid_validity: int
    uids: list[int]


def parse_appenduid(response: ImapResponse) -> AppendUid | None:
    """Read APPENDUID from an APPEND response; None when the server sent none."""
    args = find_code(response, "APPENDUID")
    if args is None:
        return None
    if len(args) != 2:
        raise _malformed()
    return AppendUid(as_number(args[0]), parse_uid_set(as_text(args[1])))


# --- capabilities -----------------------------------------------------------------------------


def parse_capability_atoms(tokens: Sequence[Token]) -> list[str]:
    """Return capability atoms as sent (tokens after the CAPABILITY keyword)."""
    atoms: list[str] = []
    for token in tokens:
        if not isinstance(token, Atom):
            raise _malformed()
        atoms.append(str(token))
    return atoms


def capabilities_in(response: ImapResponse) -> list[str] | None:
    """Find a capability list in a response: untagged CAPABILITY or a [CAPABILITY] code."""
    for group in group_responses(response.lines):
        tokens = tokenize(group) if group[0][:11].upper() == b"CAPABILITY " else []
        if tokens and isinstance(tokens[0], Atom) and tokens[0].upper() == "CAPABILITY":
            return parse_capability_atoms(tokens[1:])
    args = find_code(response, "CAPABILITY")
    return None if args is None else parse_capability_atoms(args)


# --- LIST -------------------------------------------------------------------------------------


def parse_list_response(segments: Sequence[bytes]) -> Folder:
    """Parse one `LIST (attrs) delim name [ext]` response; an undecodable name → SafetyLimit."""
    tokens = tokenize(segments)
    if len(tokens) < 4 or not (isinstance(tokens[0], Atom) and tokens[0].upper() == "LIST"):
        raise _malformed()
    attrs, delim, name = tokens[1], tokens[2], tokens[3]
    if not isinstance(attrs, list):
        raise _malformed()
    attributes = [clean_text(as_text(a)) for a in attrs if isinstance(a, Atom)]
    if len(attributes) != len(attrs):
        raise _malformed()
    delimiter = "" if delim is None else as_text(delim)
    if isinstance(name, list):
        raise _malformed()
    try:
        decoded = decode_mutf7(as_text(name))
    except (ValueError, ServiceUnavailable):
        raise SafetyLimit("the server listed a folder name that cannot be used safely") from None
    if folder_name_problem(decoded) is not None:
        raise SafetyLimit("the server listed a folder name that cannot be used safely")
    return Folder(name=decoded, delimiter=delimiter, attributes=attributes)


def list_responses(response: ImapResponse) -> list[list[bytes]]:
    """Return the logical LIST responses of a LIST command, in server order."""
    return [g for g in group_responses(response.lines) if g[0][:5].upper() == b"LIST "]


# --- SELECT / EXAMINE / STATUS ----------------------------------------------------------------


class SelectResult(Struct, frozen=True):
    """What SELECT/EXAMINE reported about the mailbox now selected."""

    uid_validity: int
    uid_next: int
    exists: int
    highest_modseq: int = 0  # 0: no CONDSTORE (or NOMODSEQ)
    flags: list[str] = field(default_factory=list)
    permanent_flags: list[str] | None = None  # None: not reported
    read_only: bool = False


def parse_select(response: ImapResponse) -> SelectResult:
    """Parse a SELECT/EXAMINE response; missing UIDVALIDITY or UIDNEXT → ServiceUnavailable."""
    uid_validity = uid_next = exists = highest_modseq = 0
    flags: list[str] = []
    permanent: list[str] | None = None
    for group in group_responses(response.lines):
        if len(group) != 1:
            continue  # FETCH data with literals (QRESYNC) is not select state
        head = group[0]
        word, _, rest = head.partition(b" ")
        upper = word.upper()
        if upper == b"OK":
            code = response_code(rest)
            if code is None:
                continue
            name, args = code
            if name == "UIDVALIDITY" and args:
                uid_validity = as_number(args[0])
            elif name == "UIDNEXT" and args:
                uid_next = as_number(args[0])
            elif name == "HIGHESTMODSEQ" and args:
                highest_modseq = as_number(args[0])
            elif name == "PERMANENTFLAGS" and args and isinstance(args[0], list):
                permanent = [as_text(t) for t in args[0]]
        elif upper == b"FLAGS":
            tokens = tokenize(group)
            if len(tokens) == 2 and isinstance(tokens[1], list):
                flags = [as_text(t) for t in tokens[1]]
        elif word.isdigit() and rest.upper() == b"EXISTS":
            exists = int(word)
    code = response_code(response.text)
    read_only = code is not None and code[0] == "READ-ONLY"
    if not (1 <= uid_validity <= UID_MAX and 1 <= uid_next <= UID_MAX + 1):
        raise ServiceUnavailable("the server gave no usable UIDVALIDITY or UIDNEXT")
    return SelectResult(
        uid_validity=uid_validity,
        uid_next=uid_next,
        exists=exists,
        highest_modseq=highest_modseq,
        flags=flags,
        permanent_flags=permanent,
        read_only=read_only,
    )


class StatusResult(Struct, frozen=True):
    """A STATUS reply: the mailbox name and its items (MESSAGES, UIDNEXT, ...)."""

    mailbox: str
    items: dict[str, int]


def parse_status(response: ImapResponse) -> StatusResult:
    """Parse the STATUS response of a STATUS command."""
    for group in group_responses(response.lines):
        if group[0][:7].upper() != b"STATUS ":
            continue
        tokens = tokenize(group)
        if len(tokens) != 3 or not isinstance(tokens[2], list):
            raise _malformed()
        try:
            mailbox = decode_mutf7(as_text(tokens[1]))
        except ValueError:
            raise _malformed() from None
        pairs = tokens[2]
        if len(pairs) % 2:
            raise _malformed()
        items = {
            as_text(pairs[i]).upper(): as_number(pairs[i + 1]) for i in range(0, len(pairs), 2)
        }
        return StatusResult(mailbox=mailbox, items=items)
    raise _malformed()


def parse_search(response: ImapResponse) -> list[int]:
    """Return the numbers of the untagged SEARCH responses (a trailing (MODSEQ n) is skipped)."""
    found: list[int] = []
    for group in group_responses(response.lines):
        head = group[0]
        if head[:6].upper() != b"SEARCH":
            continue
        plain = _PLAIN_SEARCH.fullmatch(head) if len(group) == 1 else None
        if plain is not None:
            found += map(int, plain.group(1).split())
            continue
        for token in tokenize(group)[1:]:
            if isinstance(token, list):
                continue
            found.append(as_number(token))
    return found
