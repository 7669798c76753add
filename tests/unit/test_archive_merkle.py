"""RFC 6962 / RFC 9162 tree math: the published vectors, a naive reference, properties."""

from __future__ import annotations

import hashlib

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ledger.archive.merkle import (
    EMPTY_ROOT,
    Frontier,
    Tree,
    consistency_proof,
    inclusion_proof,
    leaf_hash,
    node_hash,
    root,
    verify_consistency,
    verify_inclusion,
)

# The test tree of RFC 6962's reference code, as published by certificate-transparency and
# google/trillian (merkle/testonly/constants.go) and transparency-dev/merkle (proof/
# verify_test.go): eight leaves, the root of every prefix, and known inclusion and consistency
# proofs (leaf indexes here are 0-based).
LEAVES = [
    bytes.fromhex(h)
    for h in [
        "",
        "00",
        "10",
        "2021",
        "3031",
        "40414243",
        "5051525354555657",
        "606162636465666768696a6b6c6d6e6f",
    ]
]
ROOTS = [
    bytes.fromhex(h)
    for h in [
        "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855",
        "6e340b9cffb37a989ca544e6bb780a2c78901d3fb33738768511a30617afa01d",
        "fac54203e7cc696cf0dfcb42c92a1d9dbaf70ad9e621f4bd8d98662f00e3c125",
        "aeb6bcfe274b70a14fb067a5e5578264db0fa9b51af5e0ba159158f329e06e77",
        "d37ee418976dd95753c1c73862b9398fa2a2cf9b4ff0fdfe8b30cd95209614b7",
        "4e3bbb1f7b478dcfe71fb631631519a3bca12c9aefca1612bfce4c13a86264d4",
        "76e67dadbcdf1e10e1b74ddc608abd2f98dfb16fbce75277b5232a127f2087ef",
        "ddb89be403809e325750d3d263cd78929c2942b7942a34b77e122c9594a74c8c",
        "5dc9da79a70659a9ad559cb701ded9a2ab9d823aad2f4960cfe370eff4604328",
    ]
]
# Leaf hashes, then the perfect-subtree hashes level by level (trillian's NodeHashes).
NODES = [
    [
        "6e340b9cffb37a989ca544e6bb780a2c78901d3fb33738768511a30617afa01d",
        "96a296d224f285c67bee93c30f8a309157f0daa35dc5b87e410b78630a09cfc7",
        "0298d122906dcfc10892cb53a73992fc5b9f493ea4c9badb27b791b4127a7fe7",
        "07506a85fd9dd2f120eb694f86011e5bb4662e5c415a62917033d4a9624487e7",
        "bc1a0643b12e4d2d7c77918f44e0f4f79a838b6cf9ec5b5c283e1f4d88599e6b",
        "4271a26be0d8a84f0bd54c8c302e7cb3a3b5d1fa6780a40bcce2873477dab658",
        "b08693ec2e721597130641e8211e7eedccb4c26413963eee6c1e2ed16ffb1a5f",
        "46f6ffadd3d06a09ff3c5860d2755c8b9819db7df44251788c7d8e3180de8eb1",
    ],
    [
        "fac54203e7cc696cf0dfcb42c92a1d9dbaf70ad9e621f4bd8d98662f00e3c125",
        "5f083f0a1a33ca076a95279832580db3e0ef4584bdff1f54c8a360f50de3031e",
        "0ebc5d3437fbe2db158b9f126a1d118e308181031d0a949f8dededebc558ef6a",
        "ca854ea128ed050b41b35ffc1b87b8eb2bde461e9e3b5596ece6b9d5975a0ae0",
    ],
    [
        "d37ee418976dd95753c1c73862b9398fa2a2cf9b4ff0fdfe8b30cd95209614b7",
        "6b47aaf29ee3c2af9af889bc1fb9254dabd31177f16232dd6aab035ca39bf6e4",
    ],
    ["5dc9da79a70659a9ad559cb701ded9a2ab9d823aad2f4960cfe370eff4604328"],
]
INCLUSION = [
    (0, 1, []),
    (
        0,
        8,
        [
            "96a296d224f285c67bee93c30f8a309157f0daa35dc5b87e410b78630a09cfc7",
            "5f083f0a1a33ca076a95279832580db3e0ef4584bdff1f54c8a360f50de3031e",
            "6b47aaf29ee3c2af9af889bc1fb9254dabd31177f16232dd6aab035ca39bf6e4",
        ],
    ),
    (
        5,
        8,
        [
            "bc1a0643b12e4d2d7c77918f44e0f4f79a838b6cf9ec5b5c283e1f4d88599e6b",
            "ca854ea128ed050b41b35ffc1b87b8eb2bde461e9e3b5596ece6b9d5975a0ae0",
            "d37ee418976dd95753c1c73862b9398fa2a2cf9b4ff0fdfe8b30cd95209614b7",
        ],
    ),
    (2, 3, ["fac54203e7cc696cf0dfcb42c92a1d9dbaf70ad9e621f4bd8d98662f00e3c125"]),
    (
        1,
        5,
        [
            "6e340b9cffb37a989ca544e6bb780a2c78901d3fb33738768511a30617afa01d",
            "5f083f0a1a33ca076a95279832580db3e0ef4584bdff1f54c8a360f50de3031e",
            "bc1a0643b12e4d2d7c77918f44e0f4f79a838b6cf9ec5b5c283e1f4d88599e6b",
        ],
    ),
]
CONSISTENCY = [
    (1, 1, []),
    (
        1,
        8,
        [
            "96a296d224f285c67bee93c30f8a309157f0daa35dc5b87e410b78630a09cfc7",
            "5f083f0a1a33ca076a95279832580db3e0ef4584bdff1f54c8a360f50de3031e",
            "6b47aaf29ee3c2af9af889bc1fb9254dabd31177f16232dd6aab035ca39bf6e4",
        ],
    ),
    (
        6,
        8,
        [
            "0ebc5d3437fbe2db158b9f126a1d118e308181031d0a949f8dededebc558ef6a",
            "ca854ea128ed050b41b35ffc1b87b8eb2bde461e9e3b5596ece6b9d5975a0ae0",
            "d37ee418976dd95753c1c73862b9398fa2a2cf9b4ff0fdfe8b30cd95209614b7",
        ],
    ),
    (
        2,
        5,
        [
            "5f083f0a1a33ca076a95279832580db3e0ef4584bdff1f54c8a360f50de3031e",
            "bc1a0643b12e4d2d7c77918f44e0f4f79a838b6cf9ec5b5c283e1f4d88599e6b",
        ],
    ),
    (
        6,
        7,
        [
            "0ebc5d3437fbe2db158b9f126a1d118e308181031d0a949f8dededebc558ef6a",
            "b08693ec2e721597130641e8211e7eedccb4c26413963eee6c1e2ed16ffb1a5f",
            "d37ee418976dd95753c1c73862b9398fa2a2cf9b4ff0fdfe8b30cd95209614b7",
        ],
    ),
]
HASHES = [leaf_hash(leaf) for leaf in LEAVES]
SOME_HASH = bytes.fromhex("abacaba000000000000000000000000000000000000000000060061e00123456")


def hexes(hashes: list[bytes]) -> list[str]:
    return [h.hex() for h in hashes]


def leaves_of(size: int, salt: int = 0) -> list[bytes]:
    """Distinct leaf hashes, so no two leaves could stand in for each other."""
    return [leaf_hash(b"%d/%d" % (salt, i)) for i in range(size)]


# A naive reference: the recursive definitions of RFC 9162 §2.1.1, §2.1.3.1 and §2.1.4.1.
def ref_mth(hashes: list[bytes]) -> bytes:
    if not hashes:
        return hashlib.sha256(b"").digest()
    if len(hashes) == 1:
        return hashes[0]
    k = 1 << ((len(hashes) - 1).bit_length() - 1)
    return node_hash(ref_mth(hashes[:k]), ref_mth(hashes[k:]))


def ref_path(m: int, hashes: list[bytes]) -> list[bytes]:
    if len(hashes) <= 1:
        return []
    k = 1 << ((len(hashes) - 1).bit_length() - 1)
    if m < k:
        return [*ref_path(m, hashes[:k]), ref_mth(hashes[k:])]
    return [*ref_path(m - k, hashes[k:]), ref_mth(hashes[:k])]


def ref_subproof(m: int, hashes: list[bytes], whole: bool) -> list[bytes]:
    n = len(hashes)
    if m == n:
        return [] if whole else [ref_mth(hashes)]
    k = 1 << ((n - 1).bit_length() - 1)
    if m <= k:
        return [*ref_subproof(m, hashes[:k], whole), ref_mth(hashes[k:])]
    return [*ref_subproof(m - k, hashes[k:], False), ref_mth(hashes[:k])]


def flipped(proof: list[bytes], i: int, byte: int = 0, bit: int = 0) -> list[bytes]:
    h = bytearray(proof[i])
    h[byte] ^= 1 << bit
    return [*proof[:i], bytes(h), *proof[i + 1 :]]


class TestVectors:
    def test_the_leaf_node_and_empty_hashes(self) -> None:
        assert NODES[0] == hexes(HASHES)
        assert EMPTY_ROOT == ROOTS[0] == hashlib.sha256(b"").digest()
        for level in range(1, 4):
            below = NODES[level - 1]
            for i, h in enumerate(NODES[level]):
                left, right = bytes.fromhex(below[2 * i]), bytes.fromhex(below[2 * i + 1])
                assert h == node_hash(left, right).hex()

    def test_the_root_of_every_prefix(self) -> None:
        for size, expected in enumerate(ROOTS):
            assert expected == root(HASHES[:size])

    @pytest.mark.parametrize(("index", "size", "proof"), INCLUSION)
    def test_the_published_inclusion_proofs(self, index: int, size: int, proof: list[str]) -> None:
        assert proof == hexes(inclusion_proof(HASHES, index, size))
        path = [bytes.fromhex(h) for h in proof]
        assert verify_inclusion(HASHES[index], index, size, path, ROOTS[size])

    @pytest.mark.parametrize(("old", "new", "proof"), CONSISTENCY)
    def test_the_published_consistency_proofs(self, old: int, new: int, proof: list[str]) -> None:
        assert proof == hexes(consistency_proof(HASHES, old, new))
        path = [bytes.fromhex(h) for h in proof]
        assert verify_consistency(old, new, ROOTS[old], ROOTS[new], path)

    @pytest.mark.parametrize(("index", "size", "proof"), INCLUSION[1:])
    def test_corrupted_inclusion_proofs_fail(self, index: int, size: int, proof: list[str]) -> None:
        # The probes of transparency-dev/merkle's verifier tests.
        path, good, leaf = [bytes.fromhex(h) for h in proof], ROOTS[size], HASHES[index]
        probes = [
            (leaf, index - 1, size, path, good),
            (leaf, index + 1, size, path, good),
            (leaf, index ^ 2, size, path, good),
            (leaf, index, size * 2, path, good),
            (leaf, index, size // 2, path, good),
            (leaf_hash(b"WrongLeaf"), index, size, path, good),
            (leaf, index, size, path, EMPTY_ROOT),
            (leaf, index, size, path, SOME_HASH),
            (leaf, index, size, [*path, b""], good),
            (leaf, index, size, [*path, good], good),
            (leaf, index, size, [b"", *path], good),
            (leaf, index, size, [good, *path], good),
            (leaf, index, size, path[:-1], good),
            *((leaf, index, size, flipped(path, i, bit=3), good) for i in range(len(path))),
        ]
        if len(path) > 1:
            probes.append((leaf, index, size, [path[0], SOME_HASH, *path[1:]], good))
        for args in probes:
            assert not verify_inclusion(*args), args

    @pytest.mark.parametrize(("old", "new", "proof"), CONSISTENCY[1:])
    def test_corrupted_consistency_proofs_fail(self, old: int, new: int, proof: list[str]) -> None:
        path, r1, r2 = [bytes.fromhex(h) for h in proof], ROOTS[old], ROOTS[new]
        probes = [
            (old - 1, new, r1, r2, path),
            (old + 1, new, r1, r2, path),
            (old ^ 2, new, r1, r2, path),
            (old, new * 2, r1, r2, path),
            (old, new // 2, r1, r2, path),
            (old, new, SOME_HASH, r2, path),
            (old, new, r1, SOME_HASH, path),
            (old, new, r2, r1, path),
            (old, new, r1, r2, []),
            (old, new, r1, r2, [*path, b""]),
            (old, new, r1, r2, [*path, r1]),
            (old, new, r1, r2, [*path, r2]),
            (old, new, r1, r2, [b"", *path]),
            (old, new, r1, r2, [r1, *path]),
            (old, new, r1, r2, [r2, *path]),
            (old, new, r1, r2, [path[0], *path]),
            (old, new, r1, r2, path[:-1]),
            *((old, new, r1, r2, flipped(path, i, bit=4)) for i in range(len(path))),
        ]
        for args in probes:
            assert not verify_consistency(*args), args


class TestEdges:
    def test_trivial_consistency(self) -> None:
        r1 = ROOTS[1]
        # From the empty tree: nothing to prove, but a size-0 head must carry SHA-256("").
        assert verify_consistency(0, 0, EMPTY_ROOT, EMPTY_ROOT, [])
        assert verify_consistency(0, 5, EMPTY_ROOT, ROOTS[5], [])
        assert not verify_consistency(0, 5, SOME_HASH, ROOTS[5], [])
        assert not verify_consistency(0, 0, EMPTY_ROOT, SOME_HASH, [])
        assert not verify_consistency(0, 1, EMPTY_ROOT, r1, [EMPTY_ROOT])
        # Equal sizes: equal roots and no proof.
        assert verify_consistency(1, 1, r1, r1, [])
        assert not verify_consistency(1, 1, r1, ROOTS[2], [])
        assert not verify_consistency(1, 1, r1, r1, [r1])
        # Time does not run backwards, and a proper proof is never empty.
        assert not verify_consistency(2, 1, ROOTS[2], r1, [])
        assert not verify_consistency(1, 2, r1, ROOTS[2], [])
        assert [] == consistency_proof(HASHES, 0, 8) == consistency_proof(HASHES, 8, 8)

    def test_trivial_inclusion(self) -> None:
        h = leaf_hash(b"data")
        assert verify_inclusion(h, 0, 1, [], h)
        for index, size in [(0, 0), (1, 0), (1, 1), (2, 1), (-1, 1)]:
            assert not verify_inclusion(h, index, size, [], h)
        assert not verify_inclusion(h, 0, 1, [], EMPTY_ROOT)

    @pytest.mark.parametrize(
        "bad",
        [
            {"leaf": b"short"},
            {"leaf": "6e34" * 16},
            {"index": True},
            {"index": 0.0},
            {"size": None},
            {"proof": ["96a2" * 16]},
            {"proof": b"\x00" * 32},
            {"proof": None},
            {"proof": [None]},
            {"root": b""},
            {"root": bytearray(32)},
        ],
    )
    def test_verify_inclusion_answers_false_to_garbage(self, bad: dict[str, object]) -> None:
        args: dict[str, object] = {
            "leaf": HASHES[0],
            "index": 0,
            "size": 8,
            "proof": [bytes.fromhex(h) for h in INCLUSION[1][2]],
            "root": ROOTS[8],
        }
        assert verify_inclusion(**args)  # type: ignore[arg-type]
        assert not verify_inclusion(**{**args, **bad})  # type: ignore[arg-type]

    @pytest.mark.parametrize(
        "bad",
        [
            {"old_size": -1},
            {"old_size": "6"},
            {"new_size": 2**70},
            {"old_root": ROOTS[6].hex()},
            {"new_root": ROOTS[8][:31]},
            {"proof": [b"x"]},
            {"proof": "abc"},
            {"proof": 7},
        ],
    )
    def test_verify_consistency_answers_false_to_garbage(self, bad: dict[str, object]) -> None:
        args: dict[str, object] = {
            "old_size": 6,
            "new_size": 8,
            "old_root": ROOTS[6],
            "new_root": ROOTS[8],
            "proof": [bytes.fromhex(h) for h in CONSISTENCY[2][2]],
        }
        assert verify_consistency(**args)  # type: ignore[arg-type]
        assert not verify_consistency(**{**args, **bad})  # type: ignore[arg-type]

    def test_generators_refuse_impossible_arguments(self) -> None:
        for index, size in [(0, 0), (8, 8), (-1, 3), (0, 9)]:
            with pytest.raises(ValueError):
                inclusion_proof(HASHES, index, size)
        for old, new in [(3, 2), (-1, 2), (0, 9)]:
            with pytest.raises(ValueError):
                consistency_proof(HASHES, old, new)
        with pytest.raises(ValueError, match="32 bytes"):
            root([*HASHES, b"short"])
        with pytest.raises(ValueError, match="32 bytes"):
            inclusion_proof([*HASHES, b"short"], 0, 8)


class TestAgainstTheReference:
    def test_every_proof_of_small_trees_is_the_rfc_one(self) -> None:
        for size in range(1, 34):
            hashes = leaves_of(size)
            assert ref_mth(hashes) == root(hashes)
            for m in range(size):
                assert ref_path(m, hashes) == inclusion_proof(hashes, m, size)
            for m in range(1, size + 1):
                assert ref_subproof(m, hashes, True) == consistency_proof(hashes, m, size)

    @settings(max_examples=40, deadline=None)
    @given(st.integers(min_value=0, max_value=1100))
    def test_root_is_the_rfc_root(self, size: int) -> None:
        hashes = leaves_of(size, salt=size)
        assert ref_mth(hashes) == root(hashes)

    def test_proofs_use_only_the_first_size_leaves(self) -> None:
        hashes = leaves_of(40)
        assert inclusion_proof(hashes[:21], 7, 21) == inclusion_proof(hashes, 7, 21)
        assert consistency_proof(hashes[:21], 5, 21) == consistency_proof(hashes, 5, 21)


trees = st.integers(min_value=1, max_value=300).flatmap(
    lambda n: st.tuples(st.just(n), st.integers(min_value=0, max_value=n - 1))
)


class TestProperties:
    @settings(max_examples=150, deadline=None)
    @given(trees, st.data())
    def test_inclusion_proofs_verify_and_tampering_fails(
        self, tree: tuple[int, int], data: st.DataObject
    ) -> None:
        size, index = tree
        hashes = leaves_of(size, salt=size)
        top = root(hashes)
        proof = inclusion_proof(hashes, index, size)
        assert verify_inclusion(hashes[index], index, size, proof, top)
        if proof:
            i = data.draw(st.integers(0, len(proof) - 1))
            byte, bit = data.draw(st.integers(0, 31)), data.draw(st.integers(0, 7))
            bad = flipped(proof, i, byte, bit)
            assert not verify_inclusion(hashes[index], index, size, bad, top)
        other = data.draw(st.integers(0, size - 1).filter(lambda j: j != index)) if size > 1 else 0
        if other != index:
            assert not verify_inclusion(hashes[index], other, size, proof, top)
            assert not verify_inclusion(hashes[other], index, size, proof, top)
        # Another size, with that tree's real root: the proof no longer holds.
        bigger = leaves_of(size + 5, salt=size)
        for wrong in {max(index + 1, size - 1), size + 1, size + 5} - {size}:
            assert not verify_inclusion(hashes[index], index, wrong, proof, root(bigger[:wrong]))

    @settings(max_examples=150, deadline=None)
    @given(st.integers(min_value=1, max_value=300), st.data())
    def test_consistency_proofs_verify_and_tampering_fails(
        self, new: int, data: st.DataObject
    ) -> None:
        old = data.draw(st.integers(1, new))
        hashes = leaves_of(new + 3, salt=new)
        r1, r2 = root(hashes[:old]), root(hashes[:new])
        proof = consistency_proof(hashes, old, new)
        assert verify_consistency(old, new, r1, r2, proof)
        if not proof:
            assert old == new
            return
        i = data.draw(st.integers(0, len(proof) - 1))
        byte, bit = data.draw(st.integers(0, 31)), data.draw(st.integers(0, 7))
        assert not verify_consistency(old, new, r1, r2, flipped(proof, i, byte, bit))
        wrong_old = data.draw(st.integers(1, new).filter(lambda m: m != old))
        assert not verify_consistency(wrong_old, new, root(hashes[:wrong_old]), r2, proof)
        for wrong_new in {new + 1, new + 3, max(old, new - 1)} - {new}:
            assert not verify_consistency(old, wrong_new, r1, root(hashes[:wrong_new]), proof)
        # A different history of the same length is not consistent with this one.
        forked = [*hashes[:old], *leaves_of(new - old, salt=-new)]
        assert not verify_consistency(old, new, r1, root(forked), proof)


class TestFrontier:
    def test_the_root_of_every_prefix_of_the_vectors(self) -> None:
        frontier = Frontier()
        assert EMPTY_ROOT == frontier.root()
        for size, h in enumerate(HASHES, start=1):
            frontier.append(h)
            assert size == frontier.size
            assert ROOTS[size] == frontier.root()
        assert [NODES[3][0]] == hexes(frontier.hashes())

    def test_it_holds_one_hash_per_set_bit(self) -> None:
        frontier = Frontier()
        frontier.extend(HASHES[:7])
        # 7 = 4 + 2 + 1: the subtrees [0, 4), [4, 6) and leaf 6, largest first.
        assert [NODES[2][0], NODES[1][2], NODES[0][6]] == hexes(frontier.hashes())

    @settings(max_examples=30, deadline=None)
    @given(st.integers(min_value=0, max_value=600), st.data())
    def test_every_prefix_and_a_restore(self, size: int, data: st.DataObject) -> None:
        hashes = leaves_of(size, salt=7)
        cut = data.draw(st.integers(0, size))
        frontier = Frontier()
        for n, h in enumerate(hashes[:cut], start=1):
            frontier.append(h)
            assert root(hashes[:n]) == frontier.root()
        # Persist and restore mid-way, as the archiver does across restarts.
        saved = frontier.hashes()
        assert cut.bit_count() == len(saved)
        restored = Frontier.restore(frontier.size, saved)
        for n, h in enumerate(hashes[cut:], start=cut + 1):
            restored.append(h)
            assert root(hashes[:n]) == restored.root()
        assert size == restored.size
        assert cut == frontier.size  # the original is untouched

    def test_restore_refuses_what_cannot_be_a_frontier(self) -> None:
        good = Frontier()
        good.extend(HASHES[:6])
        assert good.root() == Frontier.restore(6, good.hashes()).root()
        for size, hashes in [
            (6, good.hashes()[:1]),
            (7, good.hashes()),
            (0, [EMPTY_ROOT]),
            (-1, []),
            (6, [good.hashes()[0], b"short"]),
        ]:
            with pytest.raises(ValueError):
                Frontier.restore(size, hashes)
        assert "Frontier(size=0)" == repr(Frontier.restore(0, []))

    def test_append_refuses_what_is_not_a_leaf_hash(self) -> None:
        frontier = Frontier()
        with pytest.raises(ValueError, match="32 bytes"):
            frontier.append(b"raw leaf data")
        assert 0 == frontier.size



@given(st.integers(min_value=0, max_value=70), st.data())
def test_one_tree_gives_every_prefix_its_root_and_proofs(count: int, data: st.DataObject) -> None:
    leaves = leaves_of(count)
    tree = Tree(leaves)
    size = data.draw(st.integers(min_value=0, max_value=count))
    assert ref_mth(leaves[:size]) == tree.root(size)
    if size:
        index = data.draw(st.integers(min_value=0, max_value=size - 1))
        assert ref_path(index, leaves[:size]) == tree.inclusion_proof(index, size)
        old = data.draw(st.integers(min_value=1, max_value=size))
        expected = [] if old == size else ref_subproof(old, leaves[:size], True)
        assert expected == tree.consistency_proof(old, size)
