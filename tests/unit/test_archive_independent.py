"""An independent verifier, aics-tlog, agrees with our signed checkpoints and Merkle proofs.

aics-tlog is a separate pure-Python implementation of c2sp.org/signed-note, tlog-checkpoint and
RFC 9162, installed by scripts/bootstrap from tests/verifiers/aics-tlog-requirements.txt. Its
absence fails these tests: an archive no second implementation has read is not yet checked.
"""

from __future__ import annotations

import base64

import aics_tlog
import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from hypothesis import given, settings
from hypothesis import strategies as st

from ledger.archive import merkle
from ledger.archive.checkpoint import Checkpoint, parse, render
from ledger.archive.signed_note import (
    NoteError,
    SignerKey,
    VerifierKey,
    generate_key,
    open_note,
    sign,
)

LOG = "archive.example/angelos"
SIGNER, VERIFIER = generate_key(LOG)

# Origins and extension lines both implementations take: aics-tlog holds an origin to the
# key-name rules (the spec only advises them), so no spaces or '+' here.
origins = st.text(
    st.characters(blacklist_categories=["Cs", "Cc", "Zs", "Zl", "Zp"], blacklist_characters="+"),
    min_size=1,
    max_size=40,
).filter(lambda s: not any(ch.isspace() for ch in s))
extension_lines = st.text(st.characters(blacklist_categories=["Cs", "Cc"]), min_size=1, max_size=30)
checkpoints = st.builds(
    Checkpoint,
    origins,
    st.integers(min_value=0, max_value=2**64 - 1),
    st.binary(min_size=32, max_size=32),
    st.lists(extension_lines, max_size=3).map(tuple),
)


def leaves_of(size: int, salt: int) -> list[bytes]:
    return [b"entry %d of tree %d" % (i, salt) for i in range(size)]


def flip(proof: list[bytes], i: int) -> list[bytes]:
    return [*proof[:i], bytes([proof[i][0] ^ 1]) + proof[i][1:], *proof[i + 1 :]]


def aics_vkey() -> aics_tlog.VKey:
    return aics_tlog.parse_vkey(VERIFIER.text())


def aics_signed(text: bytes, private: Ed25519PrivateKey, name: str) -> bytes:
    line = aics_tlog.sign_note(text.decode(), private, name)
    return bytes(aics_tlog.Note(text=text.decode(), signatures=(line,)).to_bytes())


class TestKeys:
    def test_our_verifier_key_reads_the_same_in_aics(self) -> None:
        theirs = aics_vkey()
        assert (VERIFIER.name, VERIFIER.key_id) == (theirs.name, theirs.key_id.hex())
        assert (0x01, VERIFIER.public_key) == (theirs.key_type, theirs.public_key)
        assert VERIFIER.text() == aics_tlog.format_vkey(theirs)

    def test_aics_verifier_keys_read_the_same_in_ours(self) -> None:
        private = Ed25519PrivateKey.generate()
        theirs = aics_tlog.vkey_from_ed25519("witness.example/w1", private.public_key())
        ours = VerifierKey.parse(aics_tlog.format_vkey(theirs))
        assert (theirs.name, theirs.key_id.hex(), theirs.public_key) == (
            ours.name,
            ours.key_id,
            ours.public_key,
        )

    def test_one_seed_signs_the_same_bytes_in_both(self) -> None:
        private = Ed25519PrivateKey.generate()
        ours = SignerKey(LOG, private.private_bytes_raw())
        body = render(Checkpoint(LOG, 12, bytes(range(32))))
        assert aics_signed(body, private, LOG) == sign(body, ours)


class TestOurNotesInAics:
    @settings(max_examples=60, deadline=None)
    @given(checkpoints)
    def test_aics_accepts_our_signed_checkpoints(self, cp: Checkpoint) -> None:
        note = aics_tlog.parse_note(sign(render(cp), SIGNER))
        assert aics_tlog.verify_note(note, [aics_vkey()])
        result = aics_tlog.verify_checkpoint(note, aics_vkey(), expected_origin=cp.origin)
        assert result.ok, result.error
        theirs = aics_tlog.parse_checkpoint(note.text)
        assert (cp.origin, cp.size, cp.root, cp.extensions) == (
            theirs.origin,
            theirs.size,
            theirs.root,
            theirs.extension_lines,
        )

    def test_aics_refuses_our_notes_tampered(self) -> None:
        cp = Checkpoint(LOG, 5, merkle.EMPTY_ROOT)
        signed = sign(render(cp), SIGNER)
        head, _, encoded = signed[:-1].rpartition(b" ")
        blob = bytearray(base64.b64decode(encoded))
        blob[30] ^= 0x40
        tampered = [
            signed.replace(b"\n5\n", b"\n6\n"),
            head + b" " + base64.b64encode(bytes(blob)) + b"\n",
        ]
        for note in tampered:
            parsed = aics_tlog.parse_note(note)
            assert not aics_tlog.verify_note(parsed, [aics_vkey()])
            assert not aics_tlog.verify_checkpoint(parsed, aics_vkey()).ok
        # Signed by another key of the same name: not ours, whatever the text says.
        other, _ = generate_key(LOG)
        assert not aics_tlog.verify_note(
            aics_tlog.parse_note(sign(render(cp), other)), [aics_vkey()]
        )


class TestAicsNotesInOurs:
    @settings(max_examples=60, deadline=None)
    @given(checkpoints)
    def test_we_accept_aics_signed_checkpoints(self, cp: Checkpoint) -> None:
        private = Ed25519PrivateKey.generate()
        vkey = aics_tlog.vkey_from_ed25519(LOG, private.public_key())
        theirs = aics_tlog.Checkpoint(cp.origin, cp.size, cp.root, cp.extensions)
        note = bytes(aics_tlog.sign_checkpoint(theirs, private, LOG).to_bytes())
        body = open_note(note, VerifierKey.parse(aics_tlog.format_vkey(vkey)))
        assert cp == parse(body)

    @settings(max_examples=40, deadline=None)
    @given(st.lists(st.text(st.characters(blacklist_categories=["Cs", "Cc"])), min_size=1))
    def test_we_accept_aics_signed_notes(self, lines: list[str]) -> None:
        private = Ed25519PrivateKey.generate()
        text = "".join(line + "\n" for line in lines).encode()
        vkey = aics_tlog.vkey_from_ed25519("notary.example", private.public_key())
        ours = VerifierKey.parse(aics_tlog.format_vkey(vkey))
        assert text == open_note(aics_signed(text, private, "notary.example"), ours)

    def test_we_refuse_aics_notes_tampered_or_by_another_key(self) -> None:
        private = Ed25519PrivateKey.generate()
        note = aics_signed(b"a\n1\n" + base64.b64encode(bytes(32)) + b"\n", private, LOG)
        ours = VerifierKey(LOG, private.public_key().public_bytes_raw())
        assert note.startswith(open_note(note, ours))
        with pytest.raises(NoteError, match="does not verify"):
            open_note(note.replace(b"a\n1\n", b"a\n2\n"), ours)
        with pytest.raises(NoteError, match="no signature by"):
            open_note(note, VERIFIER)


trees = st.integers(min_value=1, max_value=400)


class TestProofs:
    @settings(max_examples=80, deadline=None)
    @given(trees, st.data())
    def test_aics_accepts_our_inclusion_proofs(self, size: int, data: st.DataObject) -> None:
        leaves = leaves_of(size, salt=size)
        hashes = [merkle.leaf_hash(leaf) for leaf in leaves]
        tree = aics_tlog.MerkleTree(leaves)
        top = merkle.root(hashes)
        assert tree.root() == top
        for index in data.draw(st.lists(st.integers(0, size - 1), min_size=1, max_size=5)):
            proof = merkle.inclusion_proof(hashes, index, size)
            assert tree.inclusion_proof(index, size) == proof
            assert aics_tlog.verify_inclusion(hashes[index], index, size, proof, top)
            assert aics_tlog.verify_leaf_inclusion(leaves[index], index, size, proof, top)
            for i in range(len(proof)):
                bad = flip(proof, i)
                assert not aics_tlog.verify_inclusion(hashes[index], index, size, bad, top)
            if size > 1:
                other = (index + 1) % size
                assert not aics_tlog.verify_inclusion(hashes[index], other, size, proof, top)

    @settings(max_examples=80, deadline=None)
    @given(trees, st.data())
    def test_aics_accepts_our_consistency_proofs(self, new: int, data: st.DataObject) -> None:
        leaves = leaves_of(new, salt=-new)
        hashes = [merkle.leaf_hash(leaf) for leaf in leaves]
        tree = aics_tlog.MerkleTree(leaves)
        new_root = merkle.root(hashes)
        for old in data.draw(st.lists(st.integers(0, new), min_size=1, max_size=5)):
            old_root = merkle.root(hashes[:old])
            proof = merkle.consistency_proof(hashes, old, new)
            assert tree.consistency_proof(old, new) == proof
            assert aics_tlog.verify_consistency(old, new, old_root, new_root, proof)
            for i in range(len(proof)):
                assert not aics_tlog.verify_consistency(
                    old, new, old_root, new_root, flip(proof, i)
                )
            if 0 < old < new:
                assert not aics_tlog.verify_consistency(old, new, old_root, new_root, proof[:-1])

    @settings(max_examples=40, deadline=None)
    @given(trees, st.data())
    def test_we_accept_aics_proofs(self, size: int, data: st.DataObject) -> None:
        leaves = leaves_of(size, salt=3 * size)
        tree = aics_tlog.MerkleTree(leaves)
        index, old = data.draw(st.integers(0, size - 1)), data.draw(st.integers(0, size))
        leaf = merkle.leaf_hash(leaves[index])
        top = tree.root()
        assert merkle.verify_inclusion(leaf, index, size, tree.inclusion_proof(index), top)
        assert merkle.verify_consistency(
            old, size, tree.root(old), top, tree.consistency_proof(old, size)
        )

    def test_a_larger_tree(self) -> None:
        size = 2**16 + 3
        leaves = leaves_of(size, salt=1)
        hashes = [merkle.leaf_hash(leaf) for leaf in leaves]
        tree = aics_tlog.MerkleTree(leaves)
        top = merkle.root(hashes)
        assert tree.root() == top
        frontier = merkle.Frontier()
        frontier.extend(hashes)
        assert top == frontier.root()
        for index in (0, 1, 2**15, 2**16 - 1, 2**16, size - 1):
            proof = merkle.inclusion_proof(hashes, index, size)
            assert aics_tlog.verify_inclusion(hashes[index], index, size, proof, top)
        for old in (1, 2**16 - 1, 2**16, size - 1):
            proof = merkle.consistency_proof(hashes, old, size)
            old_root = merkle.root(hashes[:old])
            assert aics_tlog.verify_consistency(old, size, old_root, top, proof)

    def test_both_verifiers_agree_at_the_edges(self) -> None:
        empty, some = merkle.EMPTY_ROOT, merkle.leaf_hash(b"x")
        two = merkle.node_hash(some, some)
        cases = [
            (old, new, r1, r2, proof)
            for old in (0, 1, 2)
            for new in (0, 1, 2)
            for r1 in (empty, some, two)
            for r2 in (empty, some, two)
            for proof in ([], [some], [empty])
        ]
        for case in cases:
            assert aics_tlog.verify_consistency(*case) == merkle.verify_consistency(*case), case
        for index in (-1, 0, 1, 2):
            for size in (0, 1, 2, 3):
                for proof in ([], [some], [some, some]):
                    for top in (empty, some, two):
                        case2 = (some, index, size, proof, top)
                        assert aics_tlog.verify_inclusion(*case2) == merkle.verify_inclusion(
                            *case2
                        ), case2
