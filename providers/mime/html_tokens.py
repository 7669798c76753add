"""A linear HTML tokenizer: every scan starts where the last one ended; nothing is fetched or run.

It is ours, not `html.parser.HTMLParser`: on this runtime (3.11.7) the stdlib parser is
quadratic on unterminated constructs (128 KiB of "<a" takes 7 s; 1 MiB would take minutes,
CVE-2025-6069). It follows the HTML tokenizer's shapes (tags with quoted or bare attributes,
comments, doctype and bogus comments, raw-text elements such as script and style) without
building a tree, and hands each token to a subclass. Optional limits bound the token count,
the length of a tag and of a run of text; a limit that is hit sets `limits_hit`.
"""

from __future__ import annotations

import html
import re

from msgspec import Struct

from providers.mime.cleaning import cut_utf8

_TAG_NAME = re.compile(r"[A-Za-z][^\t\n\f\r />]*")
_ATTRIBUTE = re.compile(
    r"[\t\n\f\r /]*([^\t\n\f\r />][^\t\n\f\r />=]*)"
    r"(?:[\t\n\f\r ]*=[\t\n\f\r ]*(?:\"([^\"]*)\"|'([^']*)'|([^\t\n\f\r >]*)))?"
)
_TAG_REST = re.compile(r"[\t\n\f\r /]*(/?)>")
RAW_TEXT = frozenset(
    {"script", "style", "xmp", "iframe", "noembed", "noframes", "textarea", "title"}
)


class TokenLimits(Struct, frozen=True):
    """Bounds on one tokenization; None leaves a dimension unbounded."""

    max_tokens: int | None = None
    max_tag_chars: int | None = None  # a tag, "<" to ">", in characters
    max_data_bytes: int | None = None  # one run of text, in UTF-8 bytes
    attributes: bool = True  # False: attributes are skipped over, never decoded


class Stop(Exception):
    """Raised by a handler (or the token limit) to end tokenization early."""


class HtmlTokenizer:
    """Tokenize `source` once with `run()`; subclasses handle start tags, end tags and text."""

    def __init__(self, source: str, limits: TokenLimits) -> None:
        self.source = source
        self.limits = limits
        self.tokens = 0
        self.limits_hit = False

    # --- handlers ------------------------------------------------------------------------------

    def handle_start(self, name: str, attributes: dict[str, str], self_closing: bool) -> None:
        """Handle a start tag (name lower-cased, first value of each attribute kept)."""

    def handle_end(self, name: str) -> None:
        """Handle an end tag."""

    def handle_text(self, chunk: str) -> None:
        """Handle a run of text as written (character references not yet decoded)."""

    def handle_raw_text(self, name: str, chunk: str) -> None:
        """Handle the content of a raw-text element (script, style, title, ...)."""
        self.handle_text(chunk)

    # --- tokens --------------------------------------------------------------------------------

    def run(self) -> None:
        """Tokenize the whole source (a handler or a limit may end it early with Stop)."""
        text, i, n = self.source, 0, len(self.source)
        while i < n:
            lt = text.find("<", i)
            if lt < 0:
                lt = n
            if lt > i:
                self.data(text, i, lt)
            if lt >= n:
                return
            i = self.markup(text, lt)

    def count(self) -> None:
        """Count one token; stop at the token limit."""
        self.tokens += 1
        limit = self.limits.max_tokens
        if limit is not None and self.tokens > limit:
            self.limits_hit = True
            raise Stop

    def markup(self, text: str, lt: int) -> int:
        """Handle the construct starting at "<"; return the index after it."""
        following = text[lt + 1 : lt + 2]
        if following.isascii() and following.isalpha():
            return self.start_tag(text, lt)
        if following == "/":
            name = _TAG_NAME.match(text, lt + 2)
            close = text.find(">", lt + 2)
            end = len(text) if close < 0 else close + 1
            if name is not None:
                self.count()
                limit = self.limits.max_tag_chars
                if limit is None or end - lt <= limit:
                    self.handle_end(name.group(0).lower())
                else:
                    self.limits_hit = True
            return end
        if following == "!":
            if text.startswith("<!--", lt):
                close = text.find("-->", lt + 4)
                self.count()
                return len(text) if close < 0 else close + 3
            close = text.find(">", lt + 2)
            self.count()
            return len(text) if close < 0 else close + 1
        if following == "?":
            close = text.find(">", lt + 2)
            self.count()
            return len(text) if close < 0 else close + 1
        self.data(text, lt, lt + 1)
        return lt + 1

    def start_tag(self, text: str, lt: int) -> int:
        """Parse one start tag with its attributes, bounded to the tag limit."""
        self.count()
        name_match = _TAG_NAME.match(text, lt + 1)
        assert name_match is not None  # markup() saw a letter
        name = name_match.group(0).lower()
        limit = self.limits.max_tag_chars
        bound = len(text) if limit is None else min(len(text), lt + limit)
        attributes: dict[str, str] = {}
        decode = self.limits.attributes
        position = name_match.end()
        while True:
            rest = _TAG_REST.match(text, position, bound)
            if rest is not None:
                end = rest.end()
                self_closing = bool(rest.group(1))
                break
            attribute = _ATTRIBUTE.match(text, position, bound)
            if attribute is None or attribute.end() >= bound:
                if bound >= len(text):  # the input ends inside the tag: drop it
                    return len(text)
                return self.oversized_tag(text, lt, bound)
            if decode:
                key = attribute.group(1).lower()
                value = next((g for g in attribute.group(2, 3, 4) if g is not None), "")
                attributes.setdefault(key, html.unescape(value))
            position = attribute.end()
        self.handle_start(name, attributes, self_closing)
        if name in RAW_TEXT:
            return self.raw_text(text, name, end)
        return end

    def oversized_tag(self, text: str, lt: int, bound: int) -> int:
        """Skip a tag longer than the tag limit (its attributes are lost) and go on."""
        self.limits_hit = True
        close = text.find(">", bound)
        return len(text) if close < 0 else close + 1

    def raw_text(self, text: str, name: str, start: int) -> int:
        """Consume raw-text content up to its end tag (or the end of input)."""
        close = re.compile(f"</{name}[\t\n\f\r />]", re.IGNORECASE).search(text, start)
        stop = len(text) if close is None else close.start()
        if stop > start:
            self.count()
            self.handle_raw_text(name, self.cut(text, start, stop))
        return stop

    def data(self, text: str, start: int, stop: int) -> None:
        """Handle a run of character data between tags."""
        self.count()
        self.handle_text(self.cut(text, start, stop))

    def cut(self, text: str, start: int, stop: int) -> str:
        """Return text[start:stop], cut to the data limit (which is then noted as hit)."""
        limit = self.limits.max_data_bytes
        if limit is not None and stop - start > limit // 4:
            chunk = cut_utf8(text[start:stop], limit)
            if len(chunk) < stop - start:
                self.limits_hit = True
                return chunk
        return text[start:stop]
