"""RFC 6962 / RFC 9162 Merkle tree math over SHA-256: roots, proofs, their checks, a frontier.

Every generator works on a Tree: the hashes of every perfect subtree, built once level by level
(a million leaves cost a million SHA-256 calls, no recursion). Any node of RFC 9162's tree is a
fold of at most log2(n) of those, so roots of any prefix and proofs then cost microseconds.
The verifiers follow RFC 9162 §2.1.3.2 and §2.1.4.2 step by step, share nothing with the
generators, and answer False to any malformed input instead of raising.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Sequence
from typing import Final

HASH_SIZE: Final = 32
EMPTY_ROOT: Final = hashlib.sha256(b"").digest()

_sha256 = hashlib.sha256


def leaf_hash(data: bytes) -> bytes:
    """Return SHA-256(0x00 || data), the hash of one leaf."""
    return _sha256(b"\x00" + data).digest()


def node_hash(left: bytes, right: bytes) -> bytes:
    """Return SHA-256(0x01 || left || right), the hash of an interior node."""
    return _sha256(b"\x01" + left + right).digest()


def root(leaf_hashes: Sequence[bytes]) -> bytes:
    """Return the Merkle tree hash of the leaves with these hashes (EMPTY_ROOT for none)."""
    return Tree(leaf_hashes).root(len(leaf_hashes))


def inclusion_proof(leaf_hashes: Sequence[bytes], index: int, size: int) -> list[bytes]:
    """Return the RFC 9162 inclusion proof of leaf `index` in the tree of the first `size`."""
    return Tree(leaf_hashes).inclusion_proof(index, size)


def consistency_proof(leaf_hashes: Sequence[bytes], old_size: int, new_size: int) -> list[bytes]:
    """Return the RFC 9162 proof that the tree of `old_size` leaves is a prefix of `new_size`'s."""
    return Tree(leaf_hashes).consistency_proof(old_size, new_size)


class Tree:
    """Every perfect subtree's hash over a list of leaf hashes, from which any prefix's root
    and proofs are folded."""

    def __init__(self, leaf_hashes: Sequence[bytes]) -> None:
        _check_hashes(leaf_hashes)
        self.levels: list[Sequence[bytes]] = [leaf_hashes]
        sha = _sha256
        while len(self.levels[-1]) > 1:
            pairs = iter(self.levels[-1])  # neighbours in pairs; an odd last node waits
            self.levels.append(
                [sha(b"\x01" + a + b).digest() for a, b in zip(pairs, pairs, strict=False)]
            )

    @property
    def size(self) -> int:
        """Return how many leaves the tree holds."""
        return len(self.levels[0])

    def node(self, lo: int, hi: int) -> bytes:
        """Return MTH(D[lo:hi]) for a node of RFC 9162's tree (lo a multiple of a power of two
        at least hi - lo): the perfect subtrees hi - lo's binary digits name, folded from the
        right, since RFC 9162 splits at the largest power of two."""
        if lo == hi:
            return EMPTY_ROOT
        parts: list[bytes] = []
        start = lo
        width = hi - lo
        for level in range(width.bit_length() - 1, -1, -1):
            if width >> level & 1:
                parts.append(self.levels[level][start >> level])
                start += 1 << level
        folded = parts.pop()
        while parts:
            folded = _sha256(b"\x01" + parts.pop() + folded).digest()
        return folded

    def root(self, size: int) -> bytes:
        """Return the root of the tree of the first `size` leaves."""
        if not 0 <= size <= self.size:
            raise ValueError(f"no prefix of {size} in {self.size} leaves")
        return self.node(0, size)

    def inclusion_proof(self, index: int, size: int) -> list[bytes]:
        """Return the RFC 9162 inclusion proof of leaf `index` in the tree of the first `size`."""
        if not 0 <= index < size <= self.size:
            raise ValueError(f"no leaf {index} in a tree of {size} of {self.size} leaves")
        # PATH(m, D[lo:hi]) adds the sibling subtree at each split on the way down; the proof
        # lists them from the leaf up, so the last range found is the first hash.
        ranges: list[tuple[int, int]] = []
        lo, hi = 0, size
        while hi - lo > 1:
            mid = lo + _split(hi - lo)
            if index < mid:
                ranges.append((mid, hi))
                hi = mid
            else:
                ranges.append((lo, mid))
                lo = mid
        return [self.node(a, b) for a, b in reversed(ranges)]

    def consistency_proof(self, old_size: int, new_size: int) -> list[bytes]:
        """Return the RFC 9162 proof that the first `old_size` leaves prefix `new_size`'s tree."""
        if not 0 <= old_size <= new_size <= self.size:
            raise ValueError(
                f"no consistency proof from {old_size} to {new_size} of {self.size} leaves"
            )
        if old_size in (0, new_size):
            return []  # the empty tree and the tree itself are prefixes with nothing to prove
        # SUBPROOF(m, D[lo:hi], whole): `whole` stays true while D[0:m] is the left edge of
        # every subtree visited, and then the old root itself need not be sent.
        ranges: list[tuple[int, int]] = []
        lo, hi, m, whole = 0, new_size, old_size, True
        while m != hi - lo:
            mid = lo + _split(hi - lo)
            if m <= mid - lo:
                ranges.append((mid, hi))
                hi = mid
            else:
                ranges.append((lo, mid))
                m -= mid - lo
                lo = mid
                whole = False
        if not whole:
            ranges.append((lo, hi))
        return [self.node(a, b) for a, b in reversed(ranges)]


def verify_inclusion(
    leaf: bytes, index: int, size: int, proof: Sequence[bytes], root: bytes
) -> bool:
    """Tell whether `leaf` (a leaf hash) is leaf `index` of the tree of `size` with `root`."""
    path = _hashes_or_none(proof)
    if path is None or not (_is_hash(leaf) and _is_hash(root)):
        return False
    if not (_is_count(index) and _is_count(size)) or index >= size:
        return False
    fn, sn, r = index, size - 1, leaf
    for p in path:
        if sn == 0:
            return False  # the proof is longer than the path to the root
        if fn & 1 or fn == sn:
            r = node_hash(p, r)
            # A right edge without a sibling: climb to where this node is a right child again.
            while fn and not fn & 1:
                fn >>= 1
                sn >>= 1
        else:
            r = node_hash(r, p)
        fn >>= 1
        sn >>= 1
    return sn == 0 and r == root


def verify_consistency(
    old_size: int, new_size: int, old_root: bytes, new_root: bytes, proof: Sequence[bytes]
) -> bool:
    """Tell whether the tree (`old_size`, `old_root`) is a prefix of (`new_size`, `new_root`)."""
    path = _hashes_or_none(proof)
    if path is None or not (_is_hash(old_root) and _is_hash(new_root)):
        return False
    if not (_is_count(old_size) and _is_count(new_size)) or old_size > new_size:
        return False
    if old_size == 0:
        # The empty tree is a prefix of every tree and its root is SHA-256("") (RFC 9162
        # §2.1.1): a size-0 head with any other root is no tree head at all.
        return not path and old_root == EMPTY_ROOT and (new_size > 0 or new_root == EMPTY_ROOT)
    if old_size == new_size:
        return not path and old_root == new_root
    if not path:
        return False
    if old_size & (old_size - 1) == 0:
        path.insert(0, old_root)  # a perfect old tree is itself a node, left out of the proof
    fn, sn = old_size - 1, new_size - 1
    while fn & 1:
        fn >>= 1
        sn >>= 1
    fr = sr = path[0]
    for c in path[1:]:
        if sn == 0:
            return False
        if fn & 1 or fn == sn:
            fr = node_hash(c, fr)
            sr = node_hash(c, sr)
            while fn and not fn & 1:
                fn >>= 1
                sn >>= 1
        else:
            sr = node_hash(sr, c)
        fn >>= 1
        sn >>= 1
    return sn == 0 and fr == old_root and sr == new_root


class Frontier:
    """A growing tree held as the roots of its perfect subtrees, largest first (a compact range)."""

    __slots__ = ("_hashes", "_size")

    def __init__(self) -> None:
        self._size = 0
        self._hashes: list[bytes] = []

    @classmethod
    def restore(cls, size: int, hashes: Sequence[bytes]) -> Frontier:
        """Rebuild a frontier from its size and the hashes `hashes()` returned."""
        if not _is_count(size):
            raise ValueError(f"a tree size is a non-negative integer, not {size!r}")
        stored = _hashes_or_none(hashes)
        if stored is None:
            raise ValueError("a frontier holds 32-byte hashes")
        # One perfect subtree per set bit of the size: any other count is not this tree.
        if len(stored) != size.bit_count():
            raise ValueError(
                f"a tree of {size} leaves has {size.bit_count()} subtree hashes, not {len(stored)}"
            )
        frontier = cls()
        frontier._size = size
        frontier._hashes = stored
        return frontier

    @property
    def size(self) -> int:
        """Return the number of leaves appended."""
        return self._size

    def append(self, leaf_hash: bytes) -> None:
        """Add the next leaf, by its leaf hash."""
        if not _is_hash(leaf_hash):
            raise ValueError("a leaf hash is 32 bytes")
        hashes = self._hashes
        hashes.append(leaf_hash)
        # Each trailing 1 bit of the old size is a perfect subtree as large as the one just
        # completed on its right: merge them, as carrying does in binary addition.
        n = self._size
        while n & 1:
            right = hashes.pop()
            hashes[-1] = node_hash(hashes[-1], right)
            n >>= 1
        self._size += 1

    def extend(self, leaf_hashes: Iterable[bytes]) -> None:
        """Add leaves in order, by their leaf hashes."""
        for h in leaf_hashes:
            self.append(h)

    def root(self) -> bytes:
        """Return the Merkle tree hash of every leaf appended so far."""
        if not self._hashes:
            return EMPTY_ROOT
        # RFC 9162 splits at the largest power of two below the size, which is the first
        # subtree here, so the root folds the subtrees together from the right.
        acc = self._hashes[-1]
        for h in reversed(self._hashes[:-1]):
            acc = node_hash(h, acc)
        return acc

    def hashes(self) -> list[bytes]:
        """Return the subtree hashes to persist with `size` (popcount(size) of them)."""
        return list(self._hashes)

    def __repr__(self) -> str:
        return f"Frontier(size={self._size})"


def _split(n: int) -> int:
    # The largest power of two strictly below n (n >= 2): RFC 9162's k.
    return 1 << ((n - 1).bit_length() - 1)


def _check_hashes(hashes: Sequence[bytes]) -> None:
    if hashes and set(map(len, hashes)) != {HASH_SIZE}:
        raise ValueError("every leaf hash must be 32 bytes")


def _is_hash(value: object) -> bool:
    return isinstance(value, bytes) and len(value) == HASH_SIZE


def _is_count(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


def _hashes_or_none(values: object) -> list[bytes] | None:
    # A copy as a list of 32-byte hashes, or None for anything else (a str, a non-sequence).
    if not isinstance(values, Sequence) or isinstance(values, str | bytes):
        return None
    copied = list(values)
    return copied if all(_is_hash(v) for v in copied) else None
