"""RFC 6962 / RFC 9162 Merkle tree math over SHA-256: roots, proofs, their checks, a frontier.

Every generator takes the list of leaf hashes and hashes each leaf's subtree at most once per
call, level by level, so a root or a proof over a million leaves costs about a million SHA-256
calls and no recursion. The verifiers follow RFC 9162 §2.1.3.2 and §2.1.4.2 step by step, share
nothing with the generators, and answer False to any malformed input instead of raising.
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
    _check_hashes(leaf_hashes)
    return _mth(leaf_hashes)


def prefix_roots(leaf_hashes: Sequence[bytes], sizes: Iterable[int]) -> dict[int, bytes]:
    """Return the root of the first `size` leaves for each size, hashing every node once.

    The perfect subtrees are built level by level; a prefix's root folds, right to left, the
    subtrees its size's binary digits name (RFC 9162 splits at the largest power of two).
    """
    _check_hashes(leaf_hashes)
    levels: list[Sequence[bytes]] = [leaf_hashes]
    sha = _sha256
    while len(levels[-1]) > 1:
        pairs = iter(levels[-1])  # neighbours in pairs; an odd last node has no parent here
        levels.append([sha(b"\x01" + a + b).digest() for a, b in zip(pairs, pairs, strict=False)])
    roots: dict[int, bytes] = {}
    for size in sizes:
        if not 0 <= size <= len(leaf_hashes):
            raise ValueError(f"no prefix of {size} in {len(leaf_hashes)} leaves")
        parts: list[bytes] = []
        start = 0
        for level in range(size.bit_length() - 1, -1, -1):
            if size >> level & 1:
                parts.append(levels[level][start >> level])
                start += 1 << level
        folded = parts.pop() if parts else EMPTY_ROOT
        while parts:
            folded = sha(b"\x01" + parts.pop() + folded).digest()
        roots[size] = folded
    return roots


def inclusion_proof(leaf_hashes: Sequence[bytes], index: int, size: int) -> list[bytes]:
    """Return the RFC 9162 inclusion proof of leaf `index` in the tree of the first `size`."""
    if not 0 <= index < size <= len(leaf_hashes):
        raise ValueError(f"no leaf {index} in a tree of {size} of {len(leaf_hashes)} leaves")
    _check_hashes(leaf_hashes)
    # PATH(m, D[lo:hi]) adds the sibling subtree at each split on the way down; the proof lists
    # them from the leaf up, so the last range found is the first hash.
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
    return [_mth(leaf_hashes[a:b]) for a, b in reversed(ranges)]


def consistency_proof(leaf_hashes: Sequence[bytes], old_size: int, new_size: int) -> list[bytes]:
    """Return the RFC 9162 proof that the tree of `old_size` leaves is a prefix of `new_size`'s."""
    if not 0 <= old_size <= new_size <= len(leaf_hashes):
        raise ValueError(
            f"no consistency proof from {old_size} to {new_size} of {len(leaf_hashes)} leaves"
        )
    _check_hashes(leaf_hashes)
    if old_size in (0, new_size):
        return []  # the empty tree and the tree itself are prefixes with nothing to prove
    # SUBPROOF(m, D[lo:hi], whole): `whole` stays true while D[0:m] is the left edge of every
    # subtree visited, and then the old root itself need not be sent.
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
    return [_mth(leaf_hashes[a:b]) for a, b in reversed(ranges)]


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


def _mth(level: Sequence[bytes]) -> bytes:
    # Hashing neighbours in pairs level by level, an odd last node going up unchanged, builds
    # exactly RFC 9162's tree (split at the largest power of two below n), without recursion.
    if not level:
        return EMPTY_ROOT
    sha = _sha256
    while len(level) > 1:
        pairs = iter(level)  # zip(pairs, pairs) yields neighbours, dropping an odd last node
        above = [
            sha(b"\x01" + left + right).digest() for left, right in zip(pairs, pairs, strict=False)
        ]
        if len(level) & 1:
            above.append(level[-1])
        level = above
    return level[0]


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
