"""Signed notes and checkpoint bodies: Go's vectors, round trips, tampering, malformed input."""

from __future__ import annotations

import base64
import hashlib

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ledger.archive.checkpoint import Checkpoint, CheckpointError, parse, render
from ledger.archive.signed_note import (
    MAX_SIGNATURES,
    NoteError,
    NoteKeyError,
    SignerKey,
    VerifierKey,
    generate_key,
    open_note,
    sign,
)

# The keys and notes of golang.org/x/mod/sumdb/note (its package doc and example_test.go).
# EnochRoot's is the key GenerateKey makes from an all-zero seed.
PETER_SKEY = "PRIVATE+KEY+PeterNeumann+c74f20a3+AYEKFALVFGyNhPJEMzD1QIDr+Y7hfZx09iUvxdXHKDFz"
PETER_VKEY = "PeterNeumann+c74f20a3+ARpc2QcUPDhMQegwxbzhKqiBfsVkmqq/LDE4izWy10TW"
ENOCH_VKEY = "EnochRoot+af0cfe78+ATtqJ7zOtqQtYqOo0CpvDXNlMhV3HeJDpjrASKGLWdop"
TEXT = (
    b"If you think cryptography is the answer to your problem,\n"
    b"then you don't know what your problem is.\n"
)
PETER_LINE = (
    "\u2014 PeterNeumann x08go/ZJkuBS9UG/SffcvIAQxVBtiFupLLr8pAcElZInNIuGUgYN1FFYC2pZSNXgKvqfqd"
    "ngotpRZb6KE6RyyBwJnAM=\n"
).encode()
ENOCH_LINE = (
    "\u2014 EnochRoot rwz+eBzmZa0SO3NbfRGzPCpDckykFXSdeX+MNtCOXm2/5n2tiOHp+vAF1aGrQ5ovTG01oOTGwnWL"
    "ox33WWd1RvMc+QQ=\n"
).encode()
GO_NOTE = TEXT + b"\n" + PETER_LINE
GO_COSIGNED = GO_NOTE + ENOCH_LINE

# The example of c2sp.org/tlog-checkpoint.
SPEC_BODY = b"example.com/behind-the-sofa\n20852163\nCsUYapGGPo4dkMgIAUqom/Xajj7h2fB2MPA3j2jxq2I=\n"
SPEC_ROOT = base64.b64decode("CsUYapGGPo4dkMgIAUqom/Xajj7h2fB2MPA3j2jxq2I=")

SIGNER, VERIFIER = generate_key("archive.example/log")
BODY = b"archive.example/log\n3\n" + base64.b64encode(bytes(range(32))) + b"\n"
NOTE = sign(BODY, SIGNER)


def line_of(key: SignerKey, body: bytes) -> bytes:
    """The signature line `key` writes under `body`."""
    return sign(body, key)[len(body) + 1 :]


def reblob(note: bytes, change: int) -> bytes:
    """Flip one bit of byte `change` of the last line's decoded signature, re-encoded."""
    head, _, last = note[:-1].rpartition(b"\n")
    prefix, _, encoded = last.rpartition(b" ")
    blob = bytearray(base64.b64decode(encoded))
    blob[change] ^= 1
    return head + b"\n" + prefix + b" " + base64.b64encode(bytes(blob)) + b"\n"


class TestGoVectors:
    def test_the_peter_neumann_keys(self) -> None:
        signer = SignerKey.parse(PETER_SKEY)
        assert "PeterNeumann" == signer.name
        assert "c74f20a3" == signer.key_id
        assert PETER_VKEY == signer.verifier().text()
        assert PETER_SKEY == signer.text()
        assert signer.verifier() == VerifierKey.parse(PETER_VKEY)

    def test_we_write_the_note_go_writes(self) -> None:
        assert GO_NOTE == sign(TEXT, SignerKey.parse(PETER_SKEY))

    def test_we_read_the_note_go_writes(self) -> None:
        assert TEXT == open_note(GO_NOTE, VerifierKey.parse(PETER_VKEY))

    def test_a_zero_seed_gives_go_s_key_and_cosignature(self) -> None:
        enoch = SignerKey("EnochRoot", bytes(32))
        assert ENOCH_VKEY == enoch.verifier().text()
        assert ENOCH_LINE == line_of(enoch, TEXT)
        # Each key finds its own line and ignores the other's.
        assert TEXT == open_note(GO_COSIGNED, VerifierKey.parse(ENOCH_VKEY))
        assert TEXT == open_note(GO_COSIGNED, VerifierKey.parse(PETER_VKEY))


class TestKeys:
    def test_the_key_id_is_the_hash_of_name_type_and_key(self) -> None:
        expected = hashlib.sha256(
            VERIFIER.name.encode() + b"\n\x01" + VERIFIER.public_key
        ).digest()[:4]
        assert expected.hex() == VERIFIER.key_id == SIGNER.key_id

    def test_key_texts_round_trip(self) -> None:
        assert VERIFIER == VerifierKey.parse(VERIFIER.text())
        again = SignerKey.parse(SIGNER.text())
        assert SIGNER.text() == again.text()
        assert VERIFIER == again.verifier() == SIGNER.verifier()
        name, key_id, encoded = VERIFIER.text().split("+", 2)
        assert (name, key_id) == (VERIFIER.name, VERIFIER.key_id)
        assert b"\x01" + VERIFIER.public_key == base64.b64decode(encoded)

    def test_generated_keys_differ(self) -> None:
        other, _ = generate_key("archive.example/log")
        assert other.verifier() != SIGNER.verifier()

    def test_the_seed_never_shows(self) -> None:
        seed = base64.b64decode(SIGNER.text().split("+", 4)[4])[1:]
        expected = f"SignerKey(name='archive.example/log', key_id='{SIGNER.key_id}')"
        shown = [repr(SIGNER), str(SIGNER), f"{SIGNER}", "%s" % SIGNER, repr([SIGNER])]  # noqa: UP031
        for text in shown:
            assert expected in text
            for form in (seed.hex(), base64.b64encode(seed).decode(), repr(seed)):
                assert form not in text
        assert not hasattr(SIGNER, "__dict__")
        with pytest.raises(AttributeError):
            SIGNER.name = "other"  # type: ignore[misc]
        assert "key_id=" in repr(VERIFIER) and "public_key" not in repr(VERIFIER)

    @pytest.mark.parametrize(
        "name", ["", "a b", "a+b", "a\tb", "a\nb", "a\x00b", "a\u00a0b", "a\u2003b", "\ud800"]
    )
    def test_key_names_follow_the_spec(self, name: str) -> None:
        with pytest.raises(NoteKeyError, match="key name"):
            generate_key(name)
        with pytest.raises(NoteKeyError, match="key name"):
            VerifierKey(name, VERIFIER.public_key)

    def test_names_may_be_any_other_unicode(self) -> None:
        signer, verifier = generate_key("Ἀθῆναι/λόγος#1")
        assert verifier == VerifierKey.parse(verifier.text())
        assert BODY == open_note(sign(BODY, signer), verifier)

    @pytest.mark.parametrize(
        ("text", "reason"),
        [
            ("PeterNeumann+c74f20a3", "is <name>"),
            ("PeterNeumann+c74f20a4+ARpc2QcUPDhMQegwxbzhKqiBfsVkmqq/LDE4izWy10TW", "key ID"),
            ("PeterNeumann+c74f20a+ARpc2QcUPDhMQegwxbzhKqiBfsVkmqq/LDE4izWy10TW", "8 hex"),
            ("PeterNeumann+0xf20a3+ARpc2QcUPDhMQegwxbzhKqiBfsVkmqq/LDE4izWy10TW", "8 hex"),
            ("PeterNeumann+c7_4f20a+ARpc2QcUPDhMQegwxbzhKqiBfsVkmqq/LDE4izWy10TW", "8 hex"),
            ("Peter+Neumann+c74f20a3+ARpc2QcUPDhMQegwxbzhKqiBfsVkmqq/LDE4izWy10TW", "8 hex"),
            ("PeterNeumann+c74f20a3+ARpc2QcUPDhMQegwxbzhKqiBfsVkmqq/LDE4izWy10T", "base64"),
            ("PeterNeumann+c74f20a3+ARpc2QcUPDhMQegwxbzhKqiBfsVkmqq/LDE4izWy10TW=", "base64"),
            ("PeterNeumann+c74f20a3+ARpc2QcUPDhMQegwxbzhKqiBfsVkmqq/LDE4izWy10TX", "key ID"),
            ("PeterNeumann+c74f20a3+ ARpc2QcUPDhMQegwxbzhKqiBfsVkmqq/LDE4izWy10TW", "base64"),
            ("PeterNeumann+c74f20a3+AhpjMpFcwqNAM9VNaNMTrrx2NrgKsFdECHVW3kBvwpO2", "type"),
        ],
    )
    def test_bad_verifier_key_texts(self, text: str, reason: str) -> None:
        with pytest.raises(NoteKeyError, match=reason):
            VerifierKey.parse(text)

    def test_an_upper_case_key_id_is_read_as_go_reads_it(self) -> None:
        upper = PETER_VKEY.replace("c74f20a3", "C74F20A3")
        assert VerifierKey.parse(PETER_VKEY) == VerifierKey.parse(upper)

    @pytest.mark.parametrize(
        "text",
        [
            PETER_SKEY.removeprefix("PRIVATE+"),
            PETER_SKEY.replace("PRIVATE+KEY", "private+key"),
            PETER_SKEY.replace("c74f20a3", "c74f20a4"),
            PETER_SKEY[:-1],
            PETER_SKEY.replace("+AYEK", "+AoEK"),
            PETER_SKEY.replace("c74f20a3+", ""),
            PETER_SKEY.replace("PeterNeumann+c74f20a3+", ""),
            PETER_SKEY.replace("PeterNeumann+c74f20a3+", "") + "+c74f20a3",
            PETER_SKEY.replace("PeterNeumann", "Peter Neumann"),
            PETER_VKEY,
        ],
    )
    def test_bad_signer_key_texts_are_refused_without_echoing_them(self, text: str) -> None:
        with pytest.raises(NoteKeyError) as caught:
            SignerKey.parse(text)
        for piece in ("AYEKFALVFGyNhPJEMzD1QIDr", "Y7hfZx09iUvxdXHKDFz", "Neumann"):
            assert piece not in str(caught.value)

    def test_keys_anyone_could_sign_for_are_refused(self) -> None:
        identity = (1).to_bytes(32, "little")
        non_canonical = (2**255 - 19 + 1).to_bytes(32, "little")  # the identity, spelled again
        for key in [bytes(32), identity, non_canonical, (2**255 - 20).to_bytes(32, "little")]:
            with pytest.raises(NoteKeyError, match="not a safe key"):
                VerifierKey("x", key)
            encoded = base64.b64encode(b"\x01" + key).decode()
            with pytest.raises(NoteKeyError, match="not a safe key"):
                VerifierKey.parse(f"x+00000000+{encoded}")
        with pytest.raises(NoteKeyError, match="32 bytes"):
            VerifierKey("x", bytes(31))
        with pytest.raises(NoteKeyError, match="32 bytes"):
            SignerKey("x", bytes(33))


class TestNotes:
    def test_a_note_is_the_body_a_blank_line_and_the_signature(self) -> None:
        assert NOTE.startswith(BODY + b"\n\xe2\x80\x94 archive.example/log ")
        blob = base64.b64decode(NOTE[len(BODY) + 1 :].split(b" ")[2])
        assert bytes.fromhex(SIGNER.key_id) == blob[:4]
        assert 68 == len(blob)
        assert BODY == open_note(NOTE, VERIFIER)

    @settings(max_examples=60, deadline=None)
    @given(
        st.lists(st.text(st.characters(blacklist_categories=["Cs", "Cc"]), max_size=30), min_size=1)
    )
    def test_any_body_round_trips(self, lines: list[str]) -> None:
        # Blank lines inside the body are fine: the signatures follow the last one.
        body = "".join(line + "\n" for line in lines).encode()
        assert body == open_note(sign(body, SIGNER), VERIFIER)

    def test_a_tampered_body_does_not_verify(self) -> None:
        for tampered in [NOTE.replace(b"\n3\n", b"\n4\n"), b"x" + NOTE, NOTE[1:]]:
            with pytest.raises(NoteError, match="does not verify"):
                open_note(tampered, VERIFIER)

    @pytest.mark.parametrize("byte", [4, 5, 40, 67])
    def test_a_tampered_signature_does_not_verify(self, byte: int) -> None:
        with pytest.raises(NoteError, match="does not verify"):
            open_note(reblob(NOTE, byte), VERIFIER)

    def test_a_changed_key_id_is_another_key(self) -> None:
        with pytest.raises(NoteError, match=r"no signature by archive\.example/log"):
            open_note(reblob(NOTE, 0), VERIFIER)

    def test_a_truncated_signature_does_not_verify(self) -> None:
        head, _, _ = NOTE[:-1].rpartition(b" ")
        blob = bytes.fromhex(SIGNER.key_id) + b"\x00" * 10
        with pytest.raises(NoteError, match="does not verify"):
            open_note(head + b" " + base64.b64encode(blob) + b"\n", VERIFIER)

    def test_other_keys_lines_are_ignored(self) -> None:
        witness, _ = generate_key("witness.example/w1")
        namesake, _ = generate_key("archive.example/log")  # same name, another key ID
        others = line_of(witness, BODY) + line_of(namesake, BODY) + ENOCH_LINE
        both_sides = BODY + b"\n" + others + NOTE[len(BODY) + 1 :] + others
        assert BODY == open_note(both_sides, VERIFIER)
        assert BODY == open_note(NOTE + NOTE[len(BODY) + 1 :], VERIFIER)  # a repeat is no harm

    def test_a_note_without_our_signature(self) -> None:
        witness, witness_key = generate_key("witness.example/w1")
        with pytest.raises(NoteError, match=r"no signature by archive\.example/log"):
            open_note(sign(BODY, witness), VERIFIER)
        with pytest.raises(NoteError, match="no signature by"):
            open_note(NOTE, witness_key)

    def test_one_bad_line_of_ours_spoils_the_note(self) -> None:
        bad = reblob(NOTE, 20)[len(BODY) + 1 :]
        with pytest.raises(NoteError, match="does not verify"):
            open_note(NOTE + bad, VERIFIER)

    def test_up_to_100_signature_lines(self) -> None:
        foreign = ENOCH_LINE * (MAX_SIGNATURES - 1)
        assert BODY == open_note(NOTE + foreign, VERIFIER)
        with pytest.raises(NoteError, match="more than 100"):
            open_note(NOTE + foreign + ENOCH_LINE, VERIFIER)

    @pytest.mark.parametrize(
        ("note", "reason"),
        [
            (b"", "no blank line"),
            (BODY + line_of(SIGNER, BODY), "no blank line"),
            (NOTE + b"\n", "no signature lines"),
            (NOTE[:-1], "no signature lines"),
            (BODY + b"\n", "no signature lines"),
            (NOTE + b"-- other AAAAAAAA\n", "not a signature line"),
            (NOTE + b" \xe2\x80\x94 other AAAAAAAA\n", "not a signature line"),
            (NOTE + "\u2014other AAAAAAAA\n".encode(), "not a signature line"),
            (NOTE + "\u2014 other\n".encode(), "base64"),
            (NOTE + "\u2014 other \n".encode(), "base64"),
            (NOTE + "\u2014 other AAAAAA==\n".encode(), "5\\+ bytes"),
            (NOTE + "\u2014 other AAAAAAA\n".encode(), "base64"),
            (NOTE + "\u2014 other AAAAAAB=\n".encode(), "base64"),
            (NOTE + "\u2014 other AAAA AAAA\n".encode(), "base64"),
            (NOTE + "\u2014 other+x AAAAAAAA\n".encode(), "key name"),
            (NOTE + "\u2014  AAAAAAAA\n".encode(), "key name"),
            (NOTE.replace(b"\n3\n", b"\n3\r\n"), "control character"),
            (NOTE.replace(b"\n3\n", b"\n\t3\n"), "control character"),
            (NOTE + b"\x00", "control character"),
            (NOTE.replace(b"\n3\n", b"\n\xff\n"), "not UTF-8"),
            (NOTE.replace(b"\n3\n", b"\n\xed\xa0\x80\n"), "not UTF-8"),
        ],
    )
    def test_malformed_notes_say_why(self, note: bytes, reason: str) -> None:
        with pytest.raises(NoteError, match=f"malformed note: .*{reason}"):
            open_note(note, VERIFIER)

    @pytest.mark.parametrize(
        ("body", "reason"),
        [
            (b"", "end with a newline"),
            (b"no newline", "end with a newline"),
            (b"a\rb\n", "control character"),
            (b"\xc3\x28\n", "not UTF-8"),
        ],
    )
    def test_sign_refuses_bodies_no_note_can_hold(self, body: bytes, reason: str) -> None:
        with pytest.raises(NoteError, match=reason):
            sign(body, SIGNER)

    def test_a_bare_newline_is_a_body(self) -> None:
        assert b"\n" == open_note(sign(b"\n", SIGNER), VERIFIER)


class TestCheckpoint:
    def test_the_spec_example(self) -> None:
        cp = Checkpoint("example.com/behind-the-sofa", 20852163, SPEC_ROOT)
        assert SPEC_BODY == render(cp)
        assert cp == parse(SPEC_BODY)

    def test_round_trips_with_extensions(self) -> None:
        cp = Checkpoint("archive.example/log", 0, bytes(32), ("ext one", "\u2014 two", "3"))
        body = render(cp)
        assert body.endswith(b"\next one\n\xe2\x80\x94 two\n3\n")
        assert cp == parse(body)

    def test_a_signed_checkpoint(self) -> None:
        cp = Checkpoint("archive.example/log", 2**64 - 1, hashlib.sha256(b"").digest())
        assert cp == parse(open_note(sign(render(cp), SIGNER), VERIFIER))

    def test_the_origin_need_only_be_non_empty_text(self) -> None:
        # Spaces and '+' are only advised against in an origin (SHOULD), unlike key names.
        cp = Checkpoint("my log + more", 1, bytes(32))
        assert cp == parse(render(cp))

    @pytest.mark.parametrize(
        ("body", "reason"),
        [
            (b"\xff\n1\n" + SPEC_BODY[-45:], "not UTF-8"),
            (SPEC_BODY[:-1], "end with a newline"),
            (SPEC_BODY + b"\n", "extension line 1 must not be empty"),
            (SPEC_BODY + b"x\n\ny\n", "extension line 2 must not be empty"),
            (SPEC_BODY + b"x\ty\n", "extension line 1 holds a control"),
            (b"a\n1\n", "at least three lines"),
            (b"\n" + SPEC_BODY.split(b"\n", 1)[1], "origin must not be empty"),
            (SPEC_BODY.replace(b"example.com", b"example\r.com"), "origin holds a control"),
            (SPEC_BODY.replace(b"20852163", b"020852163"), "leading zero"),
            (SPEC_BODY.replace(b"20852163", b"00"), "leading zero"),
            (SPEC_BODY.replace(b"20852163", b""), "not an ASCII decimal"),
            (SPEC_BODY.replace(b"20852163", b"+1"), "not an ASCII decimal"),
            (SPEC_BODY.replace(b"20852163", b"-1"), "not an ASCII decimal"),
            (SPEC_BODY.replace(b"20852163", b" 1"), "not an ASCII decimal"),
            (SPEC_BODY.replace(b"20852163", b"1_000"), "not an ASCII decimal"),
            (SPEC_BODY.replace(b"20852163", "\u0661".encode()), "not an ASCII decimal"),
            (SPEC_BODY.replace(b"20852163", b"18446744073709551616"), "64-bit"),
            (SPEC_BODY.replace(b"20852163", b"1" * 5000), "64-bit"),
            (SPEC_BODY.replace(b"Cs", b"C-"), "not standard base64"),
            (SPEC_BODY.replace(b"Cs", b"C\xc3\xa9"), "not standard base64"),
            (SPEC_BODY.replace(b"2I=", b"2I"), "not standard base64"),
            (SPEC_BODY.replace(b"2I=", b"2J="), "not canonical"),
            (SPEC_BODY.replace(b"2I=", b"2I=\xe2\x80\x83"), "not standard base64"),
            (SPEC_BODY.replace(b"CsUY", b""), "is 29 bytes"),
            (SPEC_BODY.replace(SPEC_BODY[-45:-1], base64.b64encode(bytes(33))), "is 33 bytes"),
        ],
    )
    def test_malformed_bodies_say_why(self, body: bytes, reason: str) -> None:
        with pytest.raises(CheckpointError, match=reason):
            parse(body)

    @pytest.mark.parametrize(
        ("fields", "reason"),
        [
            ({"origin": ""}, "origin must not be empty"),
            ({"origin": "a\nb"}, "origin holds a control"),
            ({"origin": "\ud800"}, "origin is not encodable"),
            ({"size": -1}, "64-bit"),
            ({"size": 2**64}, "64-bit"),
            ({"size": True}, "integer"),
            ({"size": "1"}, "integer"),
            ({"root": bytes(31)}, "32 bytes"),
            ({"root": "00" * 32}, "32 bytes"),
            ({"extensions": ("",)}, "extension line 1 must not be empty"),
            ({"extensions": ("a", "b\nc")}, "extension line 2 holds a control"),
            ({"extensions": ["a"]}, "tuple"),
        ],
    )
    def test_checkpoints_no_body_could_hold_cannot_be_made(
        self, fields: dict[str, object], reason: str
    ) -> None:
        good: dict[str, object] = {"origin": "o", "size": 1, "root": bytes(32), "extensions": ()}
        with pytest.raises(CheckpointError, match=reason):
            Checkpoint(**{**good, **fields})  # type: ignore[arg-type]
