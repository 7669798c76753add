"""The plain alternative derived from authored HTML (sending.md §2.7.3); nothing is fetched.

Only ever fed the caller's own HTML, never a source message's HTML.
"""

from __future__ import annotations

import html
from html.parser import HTMLParser

from providers.mime.compose.text_rules import is_valid_body, normalize_newlines
from schemas.errors import InvalidArguments

MAX_DEPTH = 512
_SKIPPED = frozenset({"head", "script", "style", "template", "noscript", "iframe", "object"})
_BREAK_BEFORE = frozenset(
    {"br", "p", "div", "li", "tr", "blockquote", "pre", "h1", "h2", "h3", "h4", "h5", "h6"}
)
_BREAK_AFTER = _BREAK_BEFORE - {"br"}
_SPACE_AFTER = frozenset({"td", "th"})
_VOID = frozenset(
    {
        "area", "base", "br", "col", "embed", "hr", "img", "input", "link", "meta", "param",
        "source", "track", "wbr",
    }
)  # fmt: skip
# A new one of these closes an open one of the same name, as HTML's implied end tags do.
_SELF_CLOSING_SIBLINGS = frozenset({"p", "li", "tr", "td", "th", "option", "dt", "dd"})
_FAILED = (
    "could not derive a plain-text alternative from message.html; provide message.text "
    "explicitly or simplify the HTML"
)


class _TooDeep(Exception):
    """The HTML nests deeper than the deriver accepts."""


class _TextCollector(HTMLParser):
    """Collects text nodes with the spec's line breaks, skipping non-content subtrees."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=False)
        self.out: list[str] = []
        self.stack: list[str] = []
        self.skip_depth = 0  # number of open skipped elements

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag in _VOID:
            self._emit_break(tag, before=True)
            return
        if tag in _SELF_CLOSING_SIBLINGS and self.stack and self.stack[-1] == tag:
            self.handle_endtag(tag)
        self._emit_break(tag, before=True)
        self.stack.append(tag)
        if len(self.stack) > MAX_DEPTH:
            raise _TooDeep
        if tag in _SKIPPED:
            self.skip_depth += 1

    def handle_startendtag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self._emit_break(tag, before=True)
        self._emit_break(tag, before=False)

    def handle_endtag(self, tag: str) -> None:
        if tag not in self.stack:
            return
        while self.stack:
            open_tag = self.stack.pop()
            if open_tag in _SKIPPED:
                self.skip_depth -= 1
            self._emit_break(open_tag, before=False)
            if open_tag == tag:
                return

    def handle_data(self, data: str) -> None:
        if not self.skip_depth:
            self.out.append(data)

    def handle_entityref(self, name: str) -> None:
        if not self.skip_depth:
            text = html.unescape(f"&{name};")
            self.out.append(f"&{name}" if text == f"&{name};" else text)

    def handle_charref(self, name: str) -> None:
        if self.skip_depth:
            return
        reference = f"&#{name};"
        text = html.unescape(reference)
        if not text:
            # The stdlib drops references to forbidden code points; keep the code point
            # so the body validator refuses it, as the spec requires.
            text = chr(int(name[1:], 16) if name[:1] in "xX" else int(name))
        self.out.append(text)

    def _emit_break(self, tag: str, *, before: bool) -> None:
        if self.skip_depth:
            return
        if (before and tag in _BREAK_BEFORE) or (not before and tag in _BREAK_AFTER):
            self.out.append("\n")
        elif not before and tag in _SPACE_AFTER:
            self.out.append(" ")


def derive_plain_text(source_html: str) -> str:
    """Derive the plain alternative from authored HTML; raise InvalidArguments when it fails."""
    collector = _TextCollector()
    try:
        collector.feed(source_html)
        collector.close()
        while collector.stack:
            collector.handle_endtag(collector.stack[-1])
    except (_TooDeep, ValueError, AssertionError, OverflowError):
        raise InvalidArguments(_FAILED) from None
    raw = "".join(collector.out)
    if not is_valid_body(raw):
        raise InvalidArguments(_FAILED)
    lines = (" ".join(line.split()) for line in normalize_newlines(raw).split("\n"))
    text = "\n".join(line for line in lines if line)
    if not is_valid_body(text):
        raise InvalidArguments(_FAILED)
    return text
