"""IMAP wire codec, pure: argument encoding (mUTF-7, quoting, literals, UID sets) and parsers.

aioimaplib neither quotes nor encodes arguments and leaves response codes unparsed
(notes/stack.md §3), so every argument goes out through the helpers here and every
response we rely on is read back through the parsers here.
"""

from __future__ import annotations

import base64
import binascii
import re
import unicodedata
from collections.abc import Iterable, Iterator, Sequence
from typing import NewType, TypeAlias

from msgspec import Struct, field

from schemas import rules
from schemas.errors import InvalidArguments, SafetyLimit, ServiceUnavailable
from schemas.mailbox import Folder

# A fragment of a command line that is already encoded and safe to send. Only the helpers of
# this module make one, so a raw mailbox name or search text cannot reach the wire unencoded.
Arg = NewType("Arg", str)

UID_MAX = 4_294_967_295
MAX_CLEAN_BYTES = 256
FETCH_BATCH = 500  # aioimaplib recursion and O(n²) FETCH parsing (notes/stack.md §3.2)

_FORBIDDEN = re.compile(r"[\x00\r\n]")
_ATOM = re.compile(r"[!#$&'+,\-./0-9:;<=>?@A-Z\[^_`a-z|}~\\]+")
_RAW_SAFE = re.compile(r"[\x20-\x7e]*")


# --- folder names -----------------------------------------------------------------------------


def folder_name_problem(name: str) -> str | None:
    """Say why a folder name breaks tools.md §5.1 (1-1024 UTF-8 bytes, no Cc/Cf), or None."""
    try:
        rules.check_folder_name(name, "folder name")
    except ValueError as exc:
        return str(exc)
    return None


def validate_folder_name(name: str) -> str:
    """Return name unchanged when it is a valid folder name, else raise InvalidArguments."""
    problem = folder_name_problem(name)
    if problem is not None:
        raise InvalidArguments(problem)
    return name


# --- modified UTF-7 (RFC 3501 §5.1.3) --------------------------------------------------------


def _b64_run(chars: list[str]) -> str:
    raw = "".join(chars).encode("utf-16-be")
    return "&" + base64.b64encode(raw).decode("ascii").rstrip("=").replace("/", ",") + "-"


def encode_mutf7(name: str) -> str:
    """Encode a mailbox name in modified UTF-7; raise InvalidArguments on lone surrogates."""
    out: list[str] = []
    run: list[str] = []
    try:
        for ch in name:
            if "\x20" <= ch <= "\x7e":
                if run:
                    out.append(_b64_run(run))
                    run = []
                out.append("&-" if ch == "&" else ch)
            else:
                run.append(ch)
        if run:
            out.append(_b64_run(run))
    except UnicodeEncodeError:
        raise InvalidArguments("folder name must be valid UTF-8") from None
    return "".join(out)


def decode_mutf7(wire: str) -> str:
    """Decode a modified UTF-7 mailbox name; raise ValueError unless it is canonical."""
    out: list[str] = []
    i = 0
    while i < len(wire):
        ch = wire[i]
        if ch == "&":
            end = wire.find("-", i + 1)
            if end < 0:
                raise ValueError("unterminated modified UTF-7 run")
            chunk = wire[i + 1 : end]
            if not chunk:
                out.append("&")
            else:
                padded = chunk.replace(",", "/") + "=" * (-len(chunk) % 4)
                try:
                    raw = base64.b64decode(padded, validate=True)
                    out.append(raw.decode("utf-16-be"))
                except (binascii.Error, UnicodeDecodeError):
                    raise ValueError("invalid modified UTF-7 run") from None
            i = end + 1
        elif "\x20" <= ch <= "\x7e":
            out.append(ch)
            i += 1
        else:
            raise ValueError("raw non-ASCII in modified UTF-7 name")
    name = "".join(out)
    # Only the canonical form round-trips: a name we would re-encode differently would make
    # us address a different mailbox than the one the server listed.
    if encode_mutf7(name) != wire:
        raise ValueError("non-canonical modified UTF-7 name")
    return name


# --- arguments --------------------------------------------------------------------------------


def _reject_line_breaks(value: str) -> None:
    if _FORBIDDEN.search(value):
        raise InvalidArguments("IMAP arguments must not contain CR, LF or NUL")


def quote(value: str) -> Arg:
    """Render value as an IMAP quoted string (backslash and double quote escaped)."""
    _reject_line_breaks(value)
    return Arg('"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"')


def needs_literal(value: str) -> bool:
    """Tell whether value has 8-bit characters, which a strict IMAP4rev1 quoted string lacks."""
    return not value.isascii()


def string_arg(value: str, *, non_sync_literal_max: int = 0) -> Arg:
    """Render a string argument: quoted when 7-bit, else a non-synchronizing literal if allowed.

    `non_sync_literal_max` is what the server accepts without a continuation (LITERAL+:
    unlimited, LITERAL-: 4096, neither: 0). Without one we fall back to a UTF-8 quoted string,
    which IMAP4rev2 and Dovecot accept; aioimaplib cannot send synchronizing literals.
    """
    _reject_line_breaks(value)
    if not needs_literal(value):
        return quote(value)
    try:
        size = len(value.encode("utf-8"))
    except UnicodeEncodeError:
        raise InvalidArguments("IMAP arguments must be valid UTF-8") from None
    if size <= non_sync_literal_max:
        return Arg(f"{{{size}+}}\r\n{value}")
    return quote(value)


def atom(value: str) -> Arg:
    """Pass an IMAP atom (a keyword such as RETURN or a flag such as \\Seen) after checking it."""
    if not _ATOM.fullmatch(value):
        raise InvalidArguments("not an IMAP atom")
    return Arg(value)


def raw(syntax: str) -> Arg:
    """Pass fixed protocol syntax built by our code, e.g. "(SPECIAL-USE)", after a safety check."""
    if not _RAW_SAFE.fullmatch(syntax):
        raise InvalidArguments("IMAP syntax must be printable ASCII")
    return Arg(syntax)


def mailbox_arg(name: str) -> Arg:
    """Validate, mUTF-7-encode and quote a mailbox name: the only way a name reaches the wire."""
    return quote(encode_mutf7(validate_folder_name(name)))


def number(value: int) -> Arg:
    """Render a non-negative integer argument."""
    if value < 0:
        raise InvalidArguments("IMAP numbers are non-negative")
    return Arg(str(value))


def _check_uid(uid: int) -> int:
    if not 1 <= uid <= UID_MAX:
        raise InvalidArguments("UIDs are 1-4294967295")
    return uid


def uid_set(uids: Iterable[int]) -> Arg:
    """Render UIDs as a compact sequence set ("1:3,7"); the set must not be empty."""
    ordered = sorted({_check_uid(u) for u in uids})
    if not ordered:
        raise InvalidArguments("empty UID set")
    parts: list[str] = []
    start = prev = ordered[0]
    for uid in ordered[1:]:
        if uid != prev + 1:
            parts.append(str(start) if start == prev else f"{start}:{prev}")
            start = uid
        prev = uid
    parts.append(str(start) if start == prev else f"{start}:{prev}")
    return Arg(",".join(parts))


def uid_batches(uids: Iterable[int], size: int = FETCH_BATCH) -> list[list[int]]:
    """Split UIDs (sorted, deduplicated) into batches of at most `size`."""
    ordered = sorted({_check_uid(u) for u in uids})
    return [ordered[i : i + size] for i in range(0, len(ordered), size)]


def parse_uid_set(text: str, *, limit: int = 10_000) -> list[int]:
    """Expand a server's UID set ("4:6,9") in server order; more than `limit` UIDs → SafetyLimit."""
    out: list[int] = []
    try:
        for part in text.split(","):
            first, _, last = part.partition(":")
            lo, hi = int(first), int(last or first)
            if lo > hi:  # "4:2" means 2:4 (RFC 4315 uid-range)
                lo, hi = hi, lo
            if not (first.isdigit() and (last or first).isdigit() and 1 <= lo <= hi <= UID_MAX):
                raise ValueError(part)
            if len(out) + hi - lo + 1 > limit:
                raise SafetyLimit()
            out.extend(range(lo, hi + 1))
    except ValueError:
        raise ServiceUnavailable("malformed UID set in IMAP response") from None
    return out


def clean_text(value: str, limit: int = MAX_CLEAN_BYTES) -> str:
    """Drop control/format characters and cut to at most `limit` UTF-8 bytes on a char boundary."""
    kept = "".join(ch for ch in value if unicodedata.category(ch) not in ("Cc", "Cf", "Cs"))
    data = kept.encode("utf-8")
    if len(data) <= limit:
        return kept
    return data[:limit].decode("utf-8", "ignore")


# --- responses --------------------------------------------------------------------------------


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


class CopyUid(Struct, frozen=True):
    """COPYUID (RFC 4315): destination UIDVALIDITY and the source → destination UID pairs."""

    uid_validity: int
    source: list[int]
    destination: list[int]


def parse_appenduid(response: ImapResponse) -> AppendUid | None:
    """Read APPENDUID from an APPEND response; None when the server sent none."""
    args = find_code(response, "APPENDUID")
    if args is None:
        return None
    if len(args) != 2:
        raise _malformed()
    return AppendUid(as_number(args[0]), parse_uid_set(as_text(args[1])))


def parse_copyuid(response: ImapResponse) -> CopyUid | None:
    """Read COPYUID from a COPY/MOVE response; None when the server sent none."""
    args = find_code(response, "COPYUID")
    if args is None:
        return None
    if len(args) != 3:
        raise _malformed()
    source = parse_uid_set(as_text(args[1]))
    destination = parse_uid_set(as_text(args[2]))
    if len(source) != len(destination):
        raise _malformed()
    return CopyUid(as_number(args[0]), source, destination)


def parse_modified(response: ImapResponse) -> list[int] | None:
    """Read the MODIFIED set of a conditional STORE (RFC 7162); None when everything applied."""
    args = find_code(response, "MODIFIED")
    if args is None:
        return None
    if len(args) != 1:
        raise _malformed()
    return parse_uid_set(as_text(args[0]))


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
        for token in tokenize(group)[1:]:
            if isinstance(token, list):
                continue
            found.append(as_number(token))
    return found
