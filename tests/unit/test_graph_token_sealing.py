"""The stored Graph refresh token as pure values: its record key, and its sealed form (AES-256-GCM
under the configured key, bound to the record key, at most 24 KiB)."""

from __future__ import annotations

import base64

import pytest

from schemas.secret import Secret
from service.graph_tokens import (
    MAX_RECORD_BYTES,
    SealBroken,
    TokenSealer,
    marker_key,
    record_key,
)

TENANT = "8d2f3c1a-1b2c-4d5e-8f90-a1b2c3d4e5f6"
CLIENT = "0b5c8f8e-4c4a-4a63-9d0f-2f1de6d5b7a1"
ACCOUNT = "00000000-0000-0000-66f3-3332eca7ea81"
SENDER = "Owner@Contoso.example"
SEED = "M.C5_BAY.seed-refresh-token"
KEY = Secret("0f" * 32)
TOKEN = Secret("M.C5_BAY.rotated-refresh-token")
RECORD = record_key(TENANT, CLIENT, ACCOUNT, SENDER, Secret(SEED))


def flip(record: str, index: int) -> str:
    """The record with one bit of its sealed bytes flipped (index into nonce ‖ ciphertext)."""
    raw = bytearray(base64.urlsafe_b64decode(record[3:] + "=" * (-len(record[3:]) % 4)))
    raw[index] ^= 1
    return "v1." + base64.urlsafe_b64encode(bytes(raw)).rstrip(b"=").decode()


class TestTheRecordKey:
    def test_is_the_hash_of_the_identity_array(self) -> None:
        # By hand: sha256(SEED) = e920357e…0c04; the array below, compact, hashed as UTF-8.
        #   ["8d2f3c1a-1b2c-4d5e-8f90-a1b2c3d4e5f6","0b5c8f8e-4c4a-4a63-9d0f-2f1de6d5b7a1",
        #    "00000000-0000-0000-66f3-3332eca7ea81","Owner@Contoso.example",
        #    "e920357ee440c8fe20148ad2203ef90adb4afb8f549aa5396b6a69e0b7050c04"]
        assert (
            "angelos:microsoft:refresh:v1:"
            "{07147acf65c3d3ad14e499b2ec6caa726d2371b79c45474d20333ec8bb9ad7b4}"
        ) == RECORD

    def test_the_marker_sits_beside_it(self) -> None:
        assert RECORD + ":initialized" == marker_key(RECORD)

    @pytest.mark.parametrize(
        "changed",
        [
            ("consumers", CLIENT, ACCOUNT, SENDER, SEED),
            (TENANT, "1b5c8f8e-4c4a-4a63-9d0f-2f1de6d5b7a1", ACCOUNT, SENDER, SEED),
            (TENANT, CLIENT, "other-account", SENDER, SEED),
            (TENANT, CLIENT, ACCOUNT, SENDER.lower(), SEED),
            (TENANT, CLIENT, ACCOUNT, SENDER, SEED + "2"),  # a new consent: a new generation
        ],
    )
    def test_each_part_names_another_record(self, changed: tuple[str, ...]) -> None:
        *identity, seed = changed
        assert RECORD != record_key(*identity, Secret(seed))

    def test_names_no_secret(self) -> None:
        assert SEED not in RECORD


class TestSealing:
    def test_a_sealed_token_opens_under_its_key(self) -> None:
        sealer = TokenSealer(KEY)
        sealed = sealer.seal(TOKEN, RECORD)
        assert sealed.startswith("v1.") and "=" not in sealed
        assert TOKEN.reveal() not in sealed
        assert TOKEN == sealer.open(sealed, RECORD)

    def test_each_seal_takes_a_fresh_nonce(self) -> None:
        sealer = TokenSealer(KEY)
        assert sealer.seal(TOKEN, RECORD) != sealer.seal(TOKEN, RECORD)

    def test_an_upper_case_key_is_the_same_key(self) -> None:
        sealed = TokenSealer(Secret("0F" * 32)).seal(TOKEN, RECORD)
        assert TOKEN == TokenSealer(KEY).open(sealed, RECORD)

    def test_a_record_copied_under_another_key_does_not_open(self) -> None:
        sealer = TokenSealer(KEY)
        other = record_key(TENANT, CLIENT, "another-account", SENDER, Secret(SEED))
        with pytest.raises(SealBroken):
            sealer.open(sealer.seal(TOKEN, RECORD), other)

    def test_another_encryption_key_does_not_open_it(self) -> None:
        sealed = TokenSealer(KEY).seal(TOKEN, RECORD)
        with pytest.raises(SealBroken):
            TokenSealer(Secret("1f" * 32)).open(sealed, RECORD)

    @pytest.mark.parametrize("index", [0, 11, 12, -1])  # nonce, first cipher byte, tag
    def test_a_flipped_bit_does_not_open(self, index: int) -> None:
        sealer = TokenSealer(KEY)
        with pytest.raises(SealBroken):
            sealer.open(flip(sealer.seal(TOKEN, RECORD), index), RECORD)

    @pytest.mark.parametrize(
        "record",
        ["", "v1.", "v2." + "A" * 60, "v1.AAAA=", "v1.not base64", "V1." + "A" * 60, "v1.AAAA"],
    )
    def test_a_malformed_record_does_not_open(self, record: str) -> None:
        with pytest.raises(SealBroken):
            TokenSealer(KEY).open(record, RECORD)

    def test_a_record_over_24_kib_is_not_read(self) -> None:
        with pytest.raises(SealBroken):
            TokenSealer(KEY).open("v1." + "A" * MAX_RECORD_BYTES, RECORD)

    def test_the_largest_token_fits(self) -> None:
        sealer = TokenSealer(KEY)
        largest = Secret("t" * 16 * 1024)
        sealed = sealer.seal(largest, RECORD)
        assert len(sealed) <= MAX_RECORD_BYTES
        assert largest == sealer.open(sealed, RECORD)

    @pytest.mark.parametrize("token", ["two words", "t" * (16 * 1024 + 1), "tök"])
    def test_a_token_no_provider_could_return_is_not_sealed(self, token: str) -> None:
        with pytest.raises(SealBroken):
            TokenSealer(KEY).seal(Secret(token), RECORD)

    @pytest.mark.parametrize("key", ["0f" * 31, "0f" * 33, "zz" * 32, ""])
    def test_a_key_of_another_shape_is_refused(self, key: str) -> None:
        with pytest.raises(ValueError, match="must be 64 hex characters") as caught:
            TokenSealer(Secret(key))
        assert "0f0f" not in str(caught.value)

    def test_nothing_shows_the_key(self) -> None:
        assert "0f0f" not in repr(TokenSealer(KEY))
