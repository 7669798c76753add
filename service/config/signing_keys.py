"""The ES256 key pair of the first-party issuer as configuration reads it: strict PEM loaders.

The key pair comes from the operator's secret store (`angelos oauth signing-key` makes one);
nothing generates a key at startup. A PEM is accepted only in the one strict shape
docs/configuration.md describes, and a refusal names a rule, never key material.
"""

from __future__ import annotations

import re
from typing import Any

import msgspec
from cryptography.exceptions import UnsupportedAlgorithm
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec

MAX_PEM_BYTES = 16384
MAX_VERIFICATION_KEYS = 4
_PRIVATE_LABELS = ("PRIVATE KEY", "EC PRIVATE KEY")
_PUBLIC_LABELS = ("PUBLIC KEY",)
# One block: BEGIN line, base64 lines (no RFC 1421 headers), the matching END line.
_BLOCK = re.compile(
    r"-----BEGIN ([A-Z0-9 ]+)-----\r?\n((?:[A-Za-z0-9+/=]+\r?\n)+)-----END \1-----", re.ASCII
)
_PEM_WHITESPACE = " \t\r\n"


class KeyRefused(ValueError):
    """A PEM broke a rule; the message is the rule in words, never key material."""


class VerificationKey(msgspec.Struct, frozen=True):
    """A retiring public key, still published so tokens it signed verify until they expire."""

    kid: str
    key: Any  # cryptography's EllipticCurvePublicKey on P-256


def load_signing_key(pem: str) -> ec.EllipticCurvePrivateKey:
    """Parse the active private key: one unencrypted PKCS#8 or SEC1 block holding a P-256 key."""
    label, block = _one_block(pem, _PRIVATE_LABELS)
    loaded: object = None
    rule = ""
    try:
        loaded = serialization.load_pem_private_key(block, password=None)
    except TypeError:  # "password was not given but private key is encrypted"
        rule = "is encrypted; store the key unencrypted in the secret manager"
    except (ValueError, UnsupportedAlgorithm):
        rule = f"is not a valid {label} (bad encoding, scalar or public point)"
    if rule:
        raise KeyRefused(rule)  # outside the except block: the library's message stays out
    if not isinstance(loaded, ec.EllipticCurvePrivateKey):
        raise KeyRefused("must be an EC key on P-256")
    if not isinstance(loaded.curve, ec.SECP256R1):
        raise KeyRefused("must be on the P-256 curve")
    return loaded


def load_verification_key(pem: str) -> ec.EllipticCurvePublicKey:
    """Parse a retiring public key: one `PUBLIC KEY` (SubjectPublicKeyInfo) block on P-256."""
    _, block = _one_block(pem, _PUBLIC_LABELS)
    loaded: object = None
    try:
        loaded = serialization.load_pem_public_key(block)
    except (ValueError, UnsupportedAlgorithm):
        loaded = None
    if loaded is None:
        raise KeyRefused("is not a valid PUBLIC KEY")
    if not isinstance(loaded, ec.EllipticCurvePublicKey):
        raise KeyRefused("must be an EC key on P-256")
    if not isinstance(loaded.curve, ec.SECP256R1):
        raise KeyRefused("must be on the P-256 curve")
    return loaded


def _one_block(pem: str, labels: tuple[str, ...]) -> tuple[str, bytes]:
    """Return (label, block bytes) of the one PEM block pem holds, or raise KeyRefused."""
    if not pem.strip(_PEM_WHITESPACE):
        raise KeyRefused("is empty")
    if len(pem.encode("utf-8", "surrogatepass")) > MAX_PEM_BYTES:
        raise KeyRefused(f"must be at most {MAX_PEM_BYTES} bytes")
    if pem.count("-----BEGIN ") != 1:
        raise KeyRefused("must hold exactly one PEM block")
    if "ENCRYPTED" in pem:  # PKCS#8 "ENCRYPTED PRIVATE KEY", or SEC1's Proc-Type header
        raise KeyRefused("is encrypted; store the key unencrypted in the secret manager")
    match = _BLOCK.fullmatch(pem.strip(_PEM_WHITESPACE))
    if match is None:
        raise KeyRefused(
            "must be one PEM block with real line breaks, no headers and nothing around it"
        )
    label = match.group(1)
    if label not in labels:
        raise KeyRefused(f"must be a {' or '.join(labels)} block")
    return label, match.group(0).encode("ascii")
