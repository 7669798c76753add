"""The one multipart splitter: the parts it finds and what it reports about the body's form."""

from __future__ import annotations

from providers.mime.read.multipart import Multipart, split_multipart


def split(body: bytes, max_parts: int = 100, *, strict: bool = False) -> Multipart:
    return split_multipart(body, 0, len(body), b"b", max_parts, strict=strict)


def parts(body: bytes, found: Multipart) -> list[bytes]:
    return [body[start:end] for start, end in found.parts]


class TestParts:
    def test_the_exact_form_splits_without_its_line_breaks(self) -> None:
        body = b"--b\r\nA: 1\r\n\r\none\r\n--b\r\n\r\ntwo\r\n--b--\r\n"
        found = split(body)
        assert [b"A: 1\r\n\r\none", b"\r\ntwo"] == parts(body, found)
        assert (True, True, False, False, False) == (
            found.exact,
            found.closed,
            found.preamble,
            found.epilogue,
            found.full,
        )

    def test_bare_lf_padding_preamble_and_epilogue_are_read_and_reported(self) -> None:
        body = b"pre\n--b \t\none\n--b\ntwo\n--b--\nepilogue"
        found = split(body)
        assert [b"one", b"two"] == parts(body, found)
        assert (False, True, True) == (found.exact, found.preamble, found.epilogue)

    def test_a_line_that_only_starts_with_the_delimiter_is_content(self) -> None:
        body = b"--b\r\none\r\n--bb\r\n--b--"
        found = split(body)
        assert ([b"one\r\n--bb"], False) == (parts(body, found), found.exact)

    def test_without_a_closing_line_the_last_part_runs_to_the_end(self) -> None:
        body = b"--b\r\none\r\n--b\r\ntwo"
        found = split(body)
        assert ([b"one", b"two"], False) == (parts(body, found), found.closed)

    def test_a_body_without_delimiters_has_no_parts(self) -> None:
        assert ([], False) == (split(b"just text").parts, split(b"just text").found)

    def test_the_split_stops_at_max_parts(self) -> None:
        body = b"--b\r\n1\r\n--b\r\n2\r\n--b\r\n3\r\n--b--"
        found = split(body, max_parts=2)
        assert ([b"1", b"2"], True, False) == (parts(body, found), found.full, found.closed)

    def test_strict_stops_at_the_first_inexact_line(self) -> None:
        body = b"--b\r\none\n--b\r\ntwo\r\n--b--"
        assert ([], False) == (split(body, strict=True).parts, split(body, strict=True).exact)
