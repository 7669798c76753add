"""No one-byte change to a valid token is accepted, including re-spellings of its base64url."""

from __future__ import annotations

import base64
import string

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from service.auth.resource.jwt import TokenRejected, parse_token
from support.tokens import ACCEPTED, Minter, outcome

NOW = 1_800_000_000
MINTER = Minter(now=NOW)
TOKENS = {"RS256": MINTER.token(MINTER.rsa), "ES256": MINTER.token(MINTER.ec)}
ALPHABET = string.ascii_letters + string.digits + "-_"
PART_RULES = ("header-encoding", "payload-encoding", "signature-encoding")


def mutate(token: str, part: int, offset: int, operation: str, byte: int) -> str:
    """Flip bits of, insert before, or delete the byte at `offset` within part `part`."""
    raw = bytearray(token.encode("ascii"))
    starts = [0, token.index(".") + 1, token.rindex(".") + 1]
    ends = [starts[1] - 1, starts[2] - 1, len(raw)]
    at = starts[part] + offset % (ends[part] - starts[part] + (operation == "insert"))
    if operation == "flip":
        raw[at] ^= byte or 0x80
    elif operation == "insert":
        raw.insert(at, byte)
    else:
        del raw[at]
    return raw.decode("latin-1")  # any byte may arrive; latin-1 maps each to one character


@settings(max_examples=1500, deadline=None)
@given(
    alg=st.sampled_from(sorted(TOKENS)),
    part=st.integers(0, 2),
    offset=st.integers(0, 2**16),
    operation=st.sampled_from(["flip", "insert", "delete"]),
    byte=st.integers(0, 255),
)
def test_no_one_byte_mutant_of_a_valid_token_is_accepted(
    alg: str, part: int, offset: int, operation: str, byte: int
) -> None:
    token = TOKENS[alg]
    mutant = mutate(token, part, offset, operation, byte)
    assert mutant != token
    assert ACCEPTED != outcome(mutant, MINTER)


def lenient_decode(part: str) -> bytes:
    return base64.urlsafe_b64decode(part + "=" * (-len(part) % 4))


def respellings(token: str, part: int) -> list[str]:
    """Tokens whose part `part` differs only in the spare low bits of its last character."""
    parts = token.split(".")
    original = lenient_decode(parts[part])
    found = []
    for char in ALPHABET:
        candidate = parts[part][:-1] + char
        if candidate != parts[part] and lenient_decode(candidate) == original:
            found.append(".".join([*parts[:part], candidate, *parts[part + 1 :]]))
    return found


def padded_tokens() -> list[tuple[str, int]]:
    """Tokens (of both algorithms, payloads of every length mod 3) paired with each part."""
    return [
        (MINTER.token(key, claims={"pad": "p" * fill}), part)
        for key in (MINTER.rsa, MINTER.ec)
        for fill in range(3)
        for part in range(3)
    ]


@pytest.mark.parametrize(("token", "part"), padded_tokens())
def test_a_non_canonical_spelling_of_the_same_bytes_is_refused(token: str, part: int) -> None:
    """A lenient decoder reads these as the very same token; only canonical form is accepted."""
    assert ACCEPTED == outcome(token, MINTER)
    for respelled in respellings(token, part):
        with pytest.raises(TokenRejected) as raised:
            parse_token(respelled, MINTER.rules, NOW)
        assert PART_RULES[part] == raised.value.rule


def test_every_part_has_respellings_in_the_sample() -> None:
    """The test above is not vacuous: each part gets equivalent spellings from some token."""
    counts = [0, 0, 0]
    for token, part in padded_tokens():
        counts[part] += len(respellings(token, part))
    assert all(count >= 3 for count in counts), counts
