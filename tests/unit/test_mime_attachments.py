"""extract_attachment: exact transfer-decoded bytes, the same inventory as a read, every limit."""

from __future__ import annotations

import base64
import importlib.util
import quopri
import sys
from email.message import Message
from functools import cache
from pathlib import Path
from types import ModuleType

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from providers.mime.read.attachments import MAX_ATTACHMENT_BYTES, extract_attachment
from providers.mime.read.parse import parse_message
from schemas.errors import InvalidArguments, MailError, NotFound, SafetyLimit

CORPUS = Path(__file__).resolve().parents[2] / "fixtures" / "mail"
MIB = 1024 * 1024


@cache
def generator() -> ModuleType:
    """Import fixtures/mail/generate.py, the source of truth for the corpus bytes."""
    spec = importlib.util.spec_from_file_location("fixture_generator", CORPUS / "generate.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["fixture_generator"] = module
    spec.loader.exec_module(module)
    return module


@cache
def generated_attachments() -> dict[str, list[bytes | None]]:
    """Map each corpus file to the bytes the generator attached, in walk order.

    None stands for a message/* part, whose bytes are the generator's serialization.
    """
    return {item.name: _attached(item.message) for item in generator().corpus()}


def _attached(part: Message) -> list[bytes | None]:
    """The generator's attachments under `part` by the attachment rule."""
    if part.get_content_maintype() == "message":
        return [None]
    if part.is_multipart():
        children = part.get_payload()
        assert isinstance(children, list)
        return [found for child in children for found in _attached(child)]
    if part.get_filename() or part.get_content_maintype() != "text":
        payload = part.get_payload(decode=True)
        assert isinstance(payload, bytes)
        return [payload]
    return []


def fixture(number: str) -> bytes:
    """Return the raw bytes of corpus file NN-*.eml."""
    (path,) = CORPUS.glob(f"{number}-*.eml")
    return path.read_bytes()


def entity(headers: list[tuple[str, str]], body: bytes) -> bytes:
    """Build one MIME entity from header pairs and a body."""
    return b"".join(f"{k}: {v}\r\n".encode() for k, v in headers) + b"\r\n" + body


def multipart(parts: list[bytes], boundary: str = "b0") -> bytes:
    """Build a multipart/mixed entity with a closing delimiter."""
    delimiter = b"--" + boundary.encode()
    body = b"".join(delimiter + b"\r\n" + part + b"\r\n" for part in parts)
    content_type = f'multipart/mixed; boundary="{boundary}"'
    return entity([("Content-Type", content_type)], body + delimiter + b"--\r\n")


def attached(body: bytes, encoding: str, content_type: str = "application/octet-stream") -> bytes:
    """Build an attachment part whose body is already transfer-encoded."""
    headers = [
        ("Content-Type", content_type),
        ("Content-Transfer-Encoding", encoding),
        ("Content-Disposition", 'attachment; filename="f.bin"'),
    ]
    return entity(headers, body)


def with_text(*parts: bytes) -> bytes:
    """A multipart message with a short text part before the given parts."""
    return multipart([entity([("Content-Type", "text/plain")], b"see attached"), *parts])


CORPUS_ATTACHMENTS = [
    (name, index)
    for name, found in sorted(generated_attachments().items())
    for index in range(1, len(found) + 1)
]


class TestCorpus:
    @pytest.mark.parametrize("path", sorted(CORPUS.glob("*.eml")), ids=lambda p: p.name[:2])
    def test_the_read_inventory_lists_what_the_generator_attached(self, path: Path) -> None:
        expected = generated_attachments()[path.name]
        assert len(expected) == len(parse_message(path.read_bytes()).attachments)

    @pytest.mark.parametrize(("name", "index"), CORPUS_ATTACHMENTS)
    def test_bytes_round_trip_exactly_and_metadata_matches_the_read(
        self, name: str, index: int
    ) -> None:
        raw = (CORPUS / name).read_bytes()
        expected = generated_attachments()[name][index - 1]
        if expected is None:  # a message/* part: its exact bytes as they stand in the source
            meta, data = extract_attachment(raw, index, rfc822_size=len(raw))
            assert data in raw and len(data) == meta.size_bytes
            return
        if len(expected) > MAX_ATTACHMENT_BYTES:
            with pytest.raises(SafetyLimit):
                extract_attachment(raw, index, rfc822_size=len(raw))
            return
        meta, data = extract_attachment(raw, index, rfc822_size=len(raw))
        assert expected == data
        assert parse_message(raw).attachments[index - 1] == meta

    def test_the_iso_8859_1_and_utf8_text_attachments_are_not_converted(self) -> None:
        _, data = extract_attachment(fixture("16"), 2, rfc822_size=None)
        assert "Notes about the café été budget.\r\n".encode() == data

    def test_the_forwarded_message_is_returned_whole_as_written(self) -> None:
        raw = fixture("19")
        meta, data = extract_attachment(raw, 1, rfc822_size=len(raw))
        assert ("message/rfc822", len(data)) == (meta.content_type, meta.size_bytes)
        assert data.startswith(b"Date: Fri, 13 Feb 2026 09:00:00 +0200\r\n")
        assert b"Subject: Venue confirmed\r\n" in data
        assert data.endswith(b"--=_inner_alt_8--\r\n")
        assert data in raw

    def test_the_attachment_over_2_mib_is_a_safety_limit(self) -> None:
        raw = fixture("17")
        with pytest.raises(SafetyLimit):
            extract_attachment(raw, 1, rfc822_size=len(raw))

    def test_a_message_over_5_mib_is_a_safety_limit(self) -> None:
        raw = fixture("18")
        with pytest.raises(SafetyLimit):
            extract_attachment(raw[: 5 * MIB + 1], 1, rfc822_size=len(raw))
        with pytest.raises(SafetyLimit):
            extract_attachment(raw, 1, rfc822_size=None)

    def test_a_server_size_above_the_bytes_read_is_a_safety_limit(self) -> None:
        raw = fixture("15")
        with pytest.raises(SafetyLimit):
            extract_attachment(raw, 1, rfc822_size=len(raw) + 1)


class TestIndex:
    @pytest.mark.parametrize("index", [0, -1, 101])
    def test_an_index_outside_1_to_100_is_invalid(self, index: int) -> None:
        with pytest.raises(InvalidArguments):
            extract_attachment(fixture("15"), index, rfc822_size=None)

    def test_an_index_beyond_the_inventory_is_not_found(self) -> None:
        with pytest.raises(NotFound):
            extract_attachment(fixture("15"), 2, rfc822_size=None)
        with pytest.raises(NotFound):
            extract_attachment(fixture("01"), 1, rfc822_size=None)

    def test_an_index_beyond_a_walk_cut_by_the_part_limit_is_a_safety_limit(self) -> None:
        text = entity([("Content-Type", "text/plain")], b"t")
        raw = multipart([text] * 99 + [attached(b"late", "7bit")])
        assert [] == parse_message(raw).attachments
        with pytest.raises(SafetyLimit):
            extract_attachment(raw, 1, rfc822_size=None)

    def test_an_index_before_the_cut_is_still_served(self) -> None:
        text = entity([("Content-Type", "text/plain")], b"t")
        raw = multipart([attached(b"early", "7bit")] + [text] * 120)
        assert (b"early", "f.bin") == (
            extract_attachment(raw, 1, rfc822_size=None)[1],
            extract_attachment(raw, 1, rfc822_size=None)[0].filename,
        )

    def test_a_multipart_attachment_counts_once_and_returns_its_body(self) -> None:
        inner = multipart([attached(b"inner", "7bit")], boundary="in").replace(
            b"Content-Type:", b"Content-Disposition: attachment\r\nContent-Type:", 1
        )
        raw = with_text(inner, attached(b"second", "7bit"))
        meta, data = extract_attachment(raw, 1, rfc822_size=None)
        assert "multipart/mixed; boundary=in" == meta.content_type
        assert data.startswith(b"--in\r\n") and data.endswith(b"--in--\r\n")
        assert b"second" == extract_attachment(raw, 2, rfc822_size=None)[1]


class TestDecoding:
    def test_base64_quoted_printable_and_identity_bodies_decode_exactly(self) -> None:
        payload = bytes(range(256)) * 4
        raw = with_text(
            attached(base64.encodebytes(payload), "base64"),
            attached(quopri.encodestring(payload), "quoted-printable"),
            attached(b"caf\xe9 na\xefve", "8bit", "text/plain; charset=iso-8859-1"),
            attached(b"\x00\x01binary\xff", "binary"),
        )
        assert payload == extract_attachment(raw, 1, rfc822_size=None)[1]
        assert payload == extract_attachment(raw, 2, rfc822_size=None)[1]
        meta, data = extract_attachment(raw, 3, rfc822_size=None)
        assert (b"caf\xe9 na\xefve", "text/plain; charset=iso-8859-1") == (
            data,
            meta.content_type,
        )
        assert b"\x00\x01binary\xff" == extract_attachment(raw, 4, rfc822_size=None)[1]

    def test_exactly_2_mib_decoded_is_served(self) -> None:
        payload = b"\xab" * MAX_ATTACHMENT_BYTES
        raw = with_text(attached(base64.encodebytes(payload), "base64"))
        meta, data = extract_attachment(raw, 1, rfc822_size=len(raw))
        assert (MAX_ATTACHMENT_BYTES, payload) == (meta.size_bytes, data)

    @pytest.mark.parametrize("encoding", ["base64", "7bit"])
    def test_one_byte_over_2_mib_decoded_is_a_safety_limit(self, encoding: str) -> None:
        payload = b"a" * (MAX_ATTACHMENT_BYTES + 1)
        body = base64.encodebytes(payload) if encoding == "base64" else payload
        with pytest.raises(SafetyLimit):
            extract_attachment(with_text(attached(body, encoding)), 1, rfc822_size=None)

    @pytest.mark.parametrize("encoding", ["x-uuencode", "base-64", "gzip"])
    def test_an_unsupported_transfer_encoding_is_invalid(self, encoding: str) -> None:
        with pytest.raises(InvalidArguments):
            extract_attachment(with_text(attached(b"data", encoding)), 1, rfc822_size=None)

    @pytest.mark.parametrize("body", [b"YWJj*ZGVm", b"YWJjZA", b"YWI=YWI=", b"\xffYWJj"])
    def test_corrupt_base64_is_invalid(self, body: bytes) -> None:
        with pytest.raises(InvalidArguments):
            extract_attachment(with_text(attached(body, "base64")), 1, rfc822_size=None)

    @settings(max_examples=200)
    @given(st.binary(max_size=2000), st.integers(1, 3))
    def test_arbitrary_input_raises_only_classified_errors(self, raw: bytes, index: int) -> None:
        try:
            extract_attachment(raw, index, rfc822_size=None)
        except (InvalidArguments, NotFound, SafetyLimit):
            pass
        except MailError as error:  # pragma: no cover - would be a misclassification
            raise AssertionError(f"unexpected {error.code}") from error
