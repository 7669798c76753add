"""A send's inclusion proofs: each of its archived records against the latest checkpoint.

Anyone holding the checkpoint (signed) and a proof can check, with RFC 6962 arithmetic alone,
that the record is in the archive the owner signed: no segment files needed.
"""

from __future__ import annotations

import base64
from pathlib import Path

from msgspec import Struct, field

from ledger.archive import checkpoint as checkpoint_format
from ledger.archive import records
from ledger.archive.merkle import Tree, leaf_hash, verify_inclusion
from ledger.archive.segments import list_checkpoints, read_records
from ledger.archive.signed_note import NoteError, VerifierKey, open_note


class RecordProof(Struct, frozen=True, kw_only=True):
    """One archived record of the send: where it sits in the tree and its audit path."""

    leaf_index: int
    seq: int
    type: str
    leaf_hash: str  # base64, as the checkpoint's root is
    proof: list[str]  # base64 sibling hashes, leaf to root (RFC 9162 order)
    verified: bool


class SendInclusion(Struct, kw_only=True):
    """The send's records in the archive, proved against the latest checkpoint."""

    archive: str
    checkpoint: str = ""  # the checkpoint file proved against ("" when there is none)
    origin: str = ""
    tree_size: int = 0
    root: str = ""
    signature: str = ""  # verified under KEY, or why it was not checked
    records: list[RecordProof] = field(default_factory=list)
    unsigned: int = 0  # the send's records after the latest checkpoint (not yet signed)


def _b64(raw: bytes) -> str:
    return base64.b64encode(raw).decode("ascii")


def send_inclusion(root: Path, pid: str, key: VerifierKey | None) -> SendInclusion:
    """Prove each archived record of `pid` against the archive's latest checkpoint."""
    answer = SendInclusion(archive=str(root))
    leaves: list[bytes] = []
    mine: list[tuple[int, records.EventRecord]] = []
    needle = pid.encode("ascii")
    for _, lines, _ in read_records(root):
        for line in lines:
            if needle in line:
                record = records.decode(line)
                if isinstance(record, records.EventRecord) and record.pid == pid:
                    mine.append((len(leaves), record))
            leaves.append(leaf_hash(line))
    checkpoints = list_checkpoints(root)
    if not checkpoints:
        answer.unsigned = len(mine)
        answer.signature = "no checkpoint yet"
        return answer
    _, path = checkpoints[-1]
    note = path.read_bytes()
    if key is None:
        body = note.split(b"\n\n", 1)[0] + b"\n"
        answer.signature = "not checked (no public key given)"
    else:
        try:
            body = open_note(note, key)
            answer.signature = f"verified under {key.name} ({key.key_id})"
        except NoteError as exc:
            answer.signature = f"DOES NOT VERIFY under {key.name} ({key.key_id}): {exc}"
            body = note.split(b"\n\n", 1)[0] + b"\n"
    try:
        signed = checkpoint_format.parse(body)
    except ValueError as exc:
        answer.signature = f"checkpoint {path.name} is unreadable: {exc}"
        return answer
    answer.checkpoint, answer.origin = path.name, signed.origin
    answer.tree_size, answer.root = signed.size, _b64(signed.root)
    tree = Tree(leaves)
    for index, record in mine:
        if index >= signed.size or signed.size > len(leaves):
            answer.unsigned += 1
            continue
        proof = tree.inclusion_proof(index, signed.size)
        answer.records.append(
            RecordProof(
                leaf_index=index,
                seq=int(record.id.partition("-")[2] or 0),
                type=record.t,
                leaf_hash=_b64(leaves[index]),
                proof=[_b64(step) for step in proof],
                verified=verify_inclusion(leaves[index], index, signed.size, proof, signed.root),
            )
        )
    return answer


def render_inclusion(found: SendInclusion) -> str:
    """Say in lines what the archive proves about the send."""
    if not found.checkpoint:
        return f"archive {found.archive}: {found.signature}; {found.unsigned} record(s) unsigned"
    lines = [
        f"archive {found.archive}: checkpoint {found.checkpoint} ({found.origin}), "
        f"{found.tree_size} records, root {found.root}; signature {found.signature}",
    ]
    for proof in found.records:
        state = "proved" if proof.verified else "DOES NOT PROVE"
        lines.append(
            f"  seq {proof.seq} {proof.type}: leaf {proof.leaf_index} {state} by "
            f"{len(proof.proof)} hash(es): {' '.join(proof.proof)}"
        )
    if found.unsigned:
        lines.append(f"  {found.unsigned} record(s) archived after the checkpoint, not yet signed")
    if not found.records and not found.unsigned:
        lines.append("  the archive holds no record of this send")
    return "\n".join(lines)
