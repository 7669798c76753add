"""c2sp.org/signed-note with Ed25519 keys, as golang.org/x/mod/sumdb/note reads and writes it.

A signed note is its body (text ending in a newline), a blank line, then one line per signature:
"— <key name> <base64(4-byte key ID || signature)>". The key ID is the first four bytes of
SHA-256(name || "\\n" || 0x01 || public key). Verifier keys are written
"<name>+<8 hex key ID>+<base64(0x01 || public key)>" and signer keys
"PRIVATE+KEY+<name>+<8 hex key ID>+<base64(0x01 || seed)>".
"""

from __future__ import annotations

import base64
import binascii
import hashlib
from dataclasses import dataclass, field
from typing import Final, NoReturn, final

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey

ED25519: Final = 0x01  # the signature type byte of plain Ed25519 note signatures
KEY_SIZE: Final = 32
SIGNATURE_SIZE: Final = 64
# The spec asks verifiers for a cap of at least 16; Go's note.Open stops at 100.
MAX_SIGNATURES: Final = 100
_DASH: Final = "\N{EM DASH} "
_PRIVATE: Final = "PRIVATE+KEY+"

# Ed25519 public keys under which anyone can forge: y-coordinates (sign bit clear) of the
# small-order points of edwards25519, which RFC 8032 verification does not refuse by itself.
_P: Final = 2**255 - 19
_ORDER_8_Y: Final = 0x5FC536D880238B13933C6D305ACDFD5F098EFF289F4C345B027B2C28F95E826
_SMALL_ORDER_Y: Final = frozenset({0, 1, _P - 1, _ORDER_8_Y, _P - _ORDER_8_Y})


class NoteError(ValueError):
    """A note that is malformed, unsigned by the expected key, or signed but not verifying."""


class NoteKeyError(ValueError):
    """A note key name or key text that c2sp.org/signed-note does not allow."""


@dataclass(frozen=True)
class VerifierKey:
    """A named Ed25519 public key that checks note signatures."""

    name: str
    public_key: bytes = field(repr=False)
    key_id: str = field(init=False)  # 8 lowercase hex digits

    def __post_init__(self) -> None:
        _check_name(self.name)
        key = self.public_key
        if not isinstance(key, bytes) or len(key) != KEY_SIZE:
            raise NoteKeyError("an Ed25519 public key is 32 bytes")
        y = int.from_bytes(key, "little") & ((1 << 255) - 1)
        if y >= _P or y in _SMALL_ORDER_Y:
            raise NoteKeyError(
                f"the public key of {self.name} is small-order or non-canonical: not a safe key"
            )
        object.__setattr__(self, "key_id", _key_id(self.name, key).hex())

    @classmethod
    def parse(cls, text: str) -> VerifierKey:
        """Read `<name>+<8 hex key ID>+<base64(0x01 || public key)>`."""
        parts = text.split("+", 2)
        if len(parts) != 3:
            raise NoteKeyError("a verifier key is <name>+<key ID>+<base64 key>")
        name, key_id, encoded = parts
        if not _is_hex_id(key_id):
            raise NoteKeyError(f"the key ID {key_id!r} is not 8 hex digits")
        key = cls(name, _typed_key(encoded, "public key"))
        if key_id.lower() != key.key_id:
            raise NoteKeyError(f"the key ID {key_id} is not {key.key_id}, the ID of this key")
        return key

    def text(self) -> str:
        """Return the verifier key text."""
        encoded = _b64(bytes([ED25519]) + self.public_key)
        return f"{self.name}+{self.key_id}+{encoded}"

    def verifies(self, body: bytes, signature: bytes) -> bool:
        """Tell whether `signature` is this key's Ed25519 signature of `body`."""
        if len(signature) != SIGNATURE_SIZE:
            return False
        try:
            Ed25519PublicKey.from_public_bytes(self.public_key).verify(signature, body)
        except InvalidSignature:
            return False
        return True


@final
class SignerKey:
    """A named Ed25519 signing key; its repr and str show the name and key ID, never the seed."""

    __slots__ = ("_private", "_verifier")

    _private: Ed25519PrivateKey
    _verifier: VerifierKey

    def __init__(self, name: str, seed: bytes) -> None:
        if not isinstance(seed, bytes) or len(seed) != KEY_SIZE:
            raise NoteKeyError("an Ed25519 seed is 32 bytes")
        private = Ed25519PrivateKey.from_private_bytes(seed)
        verifier = VerifierKey(name, private.public_key().public_bytes_raw())
        object.__setattr__(self, "_private", private)
        object.__setattr__(self, "_verifier", verifier)

    @classmethod
    def parse(cls, text: str) -> SignerKey:
        """Read `PRIVATE+KEY+<name>+<8 hex key ID>+<base64(0x01 || seed)>`."""
        parts = text.removeprefix(_PRIVATE).split("+", 2) if text.startswith(_PRIVATE) else []
        if len(parts) != 3:
            # Say nothing of the text itself: it may be a secret key written wrongly.
            raise NoteKeyError("a signer key is PRIVATE+KEY+<name>+<key ID>+<base64 seed>")
        name, key_id, encoded = parts
        # Each error names the part that is wrong but never repeats it: the text holds a secret,
        # and in a text written wrongly any part may be a piece of the seed.
        if _name_problem(name) is not None:
            raise NoteKeyError("the key name of the signer key is not a valid note key name")
        if not _is_hex_id(key_id):
            raise NoteKeyError("the key ID of the signer key is not 8 hex digits")
        key = cls(name, _typed_key(encoded, "seed"))
        if key_id.lower() != key.key_id:
            raise NoteKeyError("the key ID of the signer key is not the ID of its key")
        return key

    @property
    def name(self) -> str:
        """Return the key name."""
        return self._verifier.name

    @property
    def key_id(self) -> str:
        """Return the key ID as 8 lowercase hex digits."""
        return self._verifier.key_id

    def verifier(self) -> VerifierKey:
        """Return the matching verifier key."""
        return self._verifier

    def text(self) -> str:
        """Return the signer key text, which holds the secret seed."""
        encoded = _b64(bytes([ED25519]) + self._private.private_bytes_raw())
        return f"{_PRIVATE}{self.name}+{self.key_id}+{encoded}"

    def _sign(self, body: bytes) -> bytes:
        return self._private.sign(body)

    def __repr__(self) -> str:
        return f"SignerKey(name={self.name!r}, key_id={self.key_id!r})"

    __str__ = __repr__

    def __setattr__(self, name: str, value: object) -> NoReturn:
        raise AttributeError("SignerKey is immutable")

    def __delattr__(self, name: str) -> NoReturn:
        raise AttributeError("SignerKey is immutable")


def generate_key(name: str) -> tuple[SignerKey, VerifierKey]:
    """Return a new random Ed25519 signer key named `name` and its verifier key."""
    signer = SignerKey(name, Ed25519PrivateKey.generate().private_bytes_raw())
    return signer, signer.verifier()


def sign(body: bytes, key: SignerKey) -> bytes:
    """Return the signed note: `body`, a blank line, and the signature line of `key`."""
    _check_text(body)
    if not body.endswith(b"\n"):
        raise NoteError("malformed note: the body must end with a newline")
    blob = bytes.fromhex(key.key_id) + key._sign(body)
    return body + f"\n{_DASH}{key.name} {_b64(blob)}\n".encode()


def open_note(note: bytes, key: VerifierKey) -> bytes:
    """Return the body of `note` once a signature line of `key` verifies; else raise NoteError."""
    _check_text(note)
    split = note.rfind(b"\n\n")
    if split < 0:
        raise NoteError("malformed note: no blank line before the signatures")
    body, block = note[: split + 1], note[split + 2 :]
    if not block.endswith(b"\n"):
        raise NoteError("malformed note: no signature lines after the last blank line")
    lines = block[:-1].decode("utf-8").split("\n")
    if len(lines) > MAX_SIGNATURES:
        raise NoteError(f"malformed note: more than {MAX_SIGNATURES} signature lines")
    ours = [_signature(line, key) for line in lines]
    found = [sig for sig in ours if sig is not None]
    if not found:
        raise NoteError(f"no signature by {key.name}+{key.key_id}")
    # A line naming a known key must verify, every such line: a bad one spoils the note.
    if not all(key.verifies(body, sig) for sig in found):
        raise NoteError(f"the signature by {key.name}+{key.key_id} does not verify")
    return body


def _signature(line: str, key: VerifierKey) -> bytes | None:
    # The signature in a well-formed line when it names `key` (name and key ID), else None:
    # lines of other keys (a witness, the next key of a rotation) are checked for form only.
    if not line.startswith(_DASH):
        raise NoteError(f"malformed note: {line[:40]!r} is not a signature line")
    name, space, encoded = line[len(_DASH) :].partition(" ")
    try:
        _check_name(name)
    except NoteKeyError as e:
        raise NoteError(f"malformed note: a signature line's {e}") from None
    blob = _unb64(encoded) if space else None
    if blob is None or len(blob) < 5:
        raise NoteError(f"malformed note: the signature of {name} is not base64 of 5+ bytes")
    if name != key.name or blob[:4].hex() != key.key_id:
        return None
    return blob[4:]


def _check_text(note: bytes) -> None:
    try:
        text = note.decode("utf-8")
    except UnicodeDecodeError:
        raise NoteError("malformed note: not UTF-8") from None
    if any(ch < " " and ch != "\n" for ch in text):
        raise NoteError("malformed note: a control character other than newline")


def _check_name(name: object) -> None:
    problem = _name_problem(name)
    if problem is not None:
        raise NoteKeyError(f"key name {name!r} {problem}")


def _name_problem(name: object) -> str | None:
    if not isinstance(name, str) or not name:
        return "is not a non-empty str"
    if "+" in name or any(ch.isspace() or ch < " " for ch in name):
        return "holds a space, a control character or '+'"
    try:
        name.encode("utf-8")
    except UnicodeEncodeError:
        return "is not encodable as UTF-8"
    return None


def _key_id(name: str, public_key: bytes) -> bytes:
    return hashlib.sha256(name.encode() + b"\n" + bytes([ED25519]) + public_key).digest()[:4]


def _typed_key(encoded: str, what: str) -> bytes:
    raw = _unb64(encoded)
    if raw is None or len(raw) != 1 + KEY_SIZE:
        raise NoteKeyError(f"the {what} is not base64 of a type byte and 32 bytes")
    if raw[0] != ED25519:
        raise NoteKeyError(f"key type {raw[0]:#04x} is not Ed25519 (0x01)")
    return raw[1:]


def _is_hex_id(key_id: str) -> bool:
    # Go reads the ID with ParseUint(.., 16, 32), so either case; but no sign, prefix or "_".
    return len(key_id) == 8 and all(ch in "0123456789abcdefABCDEF" for ch in key_id)


def _b64(raw: bytes) -> str:
    return base64.b64encode(raw).decode("ascii")


def _unb64(text: str) -> bytes | None:
    # Standard base64 with padding, in its one canonical spelling; None for anything else.
    try:
        raw = base64.b64decode(text.encode("ascii"), validate=True)
    except (UnicodeEncodeError, binascii.Error):
        return None
    return raw if _b64(raw) == text else None
