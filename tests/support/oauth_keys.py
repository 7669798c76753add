"""PEM texts of first-party signing keys in every shape the loader accepts or refuses."""

from __future__ import annotations

from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec, rsa

_PEM = serialization.Encoding.PEM
_PLAIN = serialization.NoEncryption()


def p256() -> ec.EllipticCurvePrivateKey:
    """A fresh P-256 private key."""
    return ec.generate_private_key(ec.SECP256R1())


def pkcs8(key: ec.EllipticCurvePrivateKey | rsa.RSAPrivateKey) -> str:
    """The key as an unencrypted `PRIVATE KEY` block."""
    return key.private_bytes(_PEM, serialization.PrivateFormat.PKCS8, _PLAIN).decode()


def sec1(key: ec.EllipticCurvePrivateKey) -> str:
    """The key as an unencrypted `EC PRIVATE KEY` block."""
    return key.private_bytes(_PEM, serialization.PrivateFormat.TraditionalOpenSSL, _PLAIN).decode()


def encrypted_pkcs8(key: ec.EllipticCurvePrivateKey) -> str:
    """The key as an `ENCRYPTED PRIVATE KEY` block."""
    encryption = serialization.BestAvailableEncryption(b"passphrase")
    return key.private_bytes(_PEM, serialization.PrivateFormat.PKCS8, encryption).decode()


def encrypted_sec1(key: ec.EllipticCurvePrivateKey) -> str:
    """The key as an `EC PRIVATE KEY` block with the legacy Proc-Type/DEK-Info headers."""
    encryption = serialization.BestAvailableEncryption(b"passphrase")
    fmt = serialization.PrivateFormat.TraditionalOpenSSL
    return key.private_bytes(_PEM, fmt, encryption).decode()


def p384_pkcs8() -> str:
    """A P-384 key, the right shape on the wrong curve."""
    return pkcs8(ec.generate_private_key(ec.SECP384R1()))


def rsa_pkcs8() -> str:
    """An RSA key in a `PRIVATE KEY` block."""
    return pkcs8(rsa.generate_private_key(public_exponent=65537, key_size=2048))


def public_pem(key: ec.EllipticCurvePrivateKey | ec.EllipticCurvePublicKey) -> str:
    """The public half as a `PUBLIC KEY` block."""
    public = key.public_key() if isinstance(key, ec.EllipticCurvePrivateKey) else key
    fmt = serialization.PublicFormat.SubjectPublicKeyInfo
    return public.public_bytes(_PEM, fmt).decode()


def scalar_hex(key: ec.EllipticCurvePrivateKey) -> str:
    """The private scalar in lower-case hex, to prove it shows up nowhere."""
    return format(key.private_numbers().private_value, "064x")


def secret_fragments(pem: str) -> list[str]:
    """Base64 lines of a PEM body: any one of them in output would leak key material."""
    return [line for line in pem.splitlines() if line and not line.startswith("-----")]
