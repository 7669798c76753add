"""HTML → readable plain text, bounded and linear; nothing is fetched, run or rendered.

The tokenizer is ours, not `html.parser.HTMLParser`: on this runtime (3.11.7) the stdlib
parser is quadratic on unterminated constructs (128 KiB of "<a" takes 7 s; 1 MiB would take
minutes, CVE-2025-6069), while here every scan starts where the last one ended, each token is
bounded to 64 KiB before it is examined, and the input, token count and element stack are
capped as tools.md §7.6 says. It follows the HTML tokenizer's shapes (tags with quoted or bare
attributes, comments, doctype and bogus comments, raw-text script/style, character references
through `html.unescape`) without building a tree.
"""

from __future__ import annotations

import contextlib
import html
import re
from urllib.parse import urlsplit

from msgspec import Struct

from providers.mime.cleaning import clean_block, cut_utf8

MAX_INPUT_BYTES = 1024 * 1024
MAX_TOKEN_BYTES = 64 * 1024
# Tags are bounded in characters (they are ASCII in practice); data runs in UTF-8 bytes.
MAX_TAG_CHARS = 64 * 1024
MAX_TOKENS = 20_000
MAX_STACK = 128
MAX_LINK_BYTES = 2048

_SKIPPED = frozenset(
    {"script", "style", "head", "template", "noscript", "iframe", "object", "title", "svg"}
    | {"math", "select", "noembed", "noframes", "applet", "canvas", "audio", "video"}
)
_RAW_TEXT = frozenset(
    {"script", "style", "xmp", "iframe", "noembed", "noframes", "textarea", "title"}
)
_VOID = frozenset(
    {"area", "base", "br", "col", "embed", "hr", "img", "input", "link", "meta", "param"}
    | {"source", "track", "wbr", "basefont", "bgsound", "frame", "keygen"}
)
_PARAGRAPH = frozenset(
    {"p", "h1", "h2", "h3", "h4", "h5", "h6", "table", "ul", "ol", "dl", "blockquote", "pre"}
    | {"hr", "address", "figure", "form", "fieldset", "center", "section", "article"}
)
_LINE = frozenset(
    {"div", "br", "li", "tr", "dt", "dd", "header", "footer", "nav", "aside", "main", "caption"}
    | {"figcaption", "legend", "details", "summary", "tbody", "thead", "tfoot", "body", "html"}
)
# Start tags that close an open element of the same name (HTML's implied end tags, simplified).
_SELF_CLOSING_SIBLINGS = frozenset({"p", "li", "dt", "dd", "tr", "td", "th", "option", "a"})
_HEAD_CONTENT = frozenset(
    {"title", "meta", "link", "style", "script", "base", "noscript", "template"}
)

_TAG_NAME = re.compile(r"[A-Za-z][^\t\n\f\r />]*")
_ATTRIBUTE = re.compile(
    r"[\t\n\f\r /]*([^\t\n\f\r />][^\t\n\f\r />=]*)"
    r"(?:[\t\n\f\r ]*=[\t\n\f\r ]*(?:\"([^\"]*)\"|'([^']*)'|([^\t\n\f\r >]*)))?"
)
_TAG_REST = re.compile(r"[\t\n\f\r /]*(/?)>")
_SPACES = re.compile(r"[\t\n\f\r ]+")
_HIDDEN_STYLE = re.compile(r"display\s*:\s*none|visibility\s*:\s*hidden", re.IGNORECASE)
_BLANK_RUNS = re.compile(r"\n{3,}")
_CLASS_SELECTOR = re.compile(r"[A-Za-z0-9_-]*\.([A-Za-z0-9_-]+)")
_MAX_HIDDEN_CLASSES = 1000
_URL_UNSAFE = re.compile(r"[\x00-\x20\x7f-\x9f\"<>\\^`{|}]")


class HtmlText(Struct, frozen=True):
    """The text extracted from HTML, and whether any extraction limit was hit."""

    text: str
    limits_hit: bool


class _Stop(Exception):
    """Raised inside the walk when a limit ends extraction."""


class _Extractor:
    """One extraction: a token loop over `source` writing text pieces to `out`."""

    def __init__(self, source: str) -> None:
        self.source = source
        self.out: list[str] = []
        # name, hides its content, link target, len(out) when opened
        self.stack: list[tuple[str, bool, str, int]] = []
        self.hidden = 0
        self.pre = 0
        self.tokens = 0
        self.limits_hit = False
        self.newlines = 2  # trailing line breaks of the output so far (0-2)
        self.after_space = False  # the output ends with a space or tab
        self.hidden_classes: set[str] = set()

    # --- tokens --------------------------------------------------------------------------------

    def run(self) -> None:
        """Tokenize the whole source, dispatching each token."""
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
        if self.tokens > MAX_TOKENS:
            self.limits_hit = True
            raise _Stop

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
                if end - lt <= MAX_TAG_CHARS:
                    self.end_tag(name.group(0).lower())
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
        """Parse one start tag with its attributes, bounded to the token limit."""
        self.count()
        name_match = _TAG_NAME.match(text, lt + 1)
        assert name_match is not None  # markup() saw a letter
        name = name_match.group(0).lower()
        bound = min(len(text), lt + MAX_TAG_CHARS)
        attributes: dict[str, str] = {}
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
                return self.oversized_tag(text, lt)
            key = attribute.group(1).lower()
            value = next((g for g in attribute.group(2, 3, 4) if g is not None), "")
            attributes.setdefault(key, html.unescape(value))
            position = attribute.end()
        self.open(name, attributes, self_closing)
        if name in _RAW_TEXT:
            return self.raw_text(text, name, end)
        return end

    def oversized_tag(self, text: str, lt: int) -> int:
        """Skip a tag longer than the token limit (its attributes are lost) and go on."""
        self.limits_hit = True
        close = text.find(">", lt + MAX_TAG_CHARS)
        return len(text) if close < 0 else close + 1

    def raw_text(self, text: str, name: str, start: int) -> int:
        """Consume raw-text content up to its end tag (or the end of input)."""
        close = re.compile(f"</{name}[\t\n\f\r />]", re.IGNORECASE).search(text, start)
        stop = len(text) if close is None else close.start()
        if stop > start:
            if name == "style":
                self.note_hidden_classes(text[start : min(stop, start + MAX_TAG_CHARS)])
            self.data(text, start, stop)
        return stop

    def note_hidden_classes(self, css: str) -> None:
        """Remember classes a style sheet hides, so hidden preheader text stays hidden."""
        for rule in css.split("}"):
            selectors, brace, declarations = rule.partition("{")
            if brace and _HIDDEN_STYLE.search(declarations):
                for selector in selectors.split(","):
                    simple = _CLASS_SELECTOR.fullmatch(selector.strip())
                    if simple and len(self.hidden_classes) < _MAX_HIDDEN_CLASSES:
                        self.hidden_classes.add(simple.group(1))

    def data(self, text: str, start: int, stop: int) -> None:
        """Handle a run of character data between tags."""
        self.count()
        if stop - start > MAX_TOKEN_BYTES // 4:
            chunk = cut_utf8(text[start:stop], MAX_TOKEN_BYTES)
            if len(chunk) < stop - start:
                stop = start + len(chunk)
                self.limits_hit = True
        if self.hidden:
            return
        chunk = html.unescape(text[start:stop])
        if self.pre:
            self.write(chunk.replace("\r\n", "\n"))
            return
        chunk = _SPACES.sub(" ", chunk)
        if self.newlines or self.after_space:
            chunk = chunk.lstrip(" ")
        self.write(chunk)

    # --- elements ------------------------------------------------------------------------------

    def open(self, name: str, attributes: dict[str, str], self_closing: bool) -> None:
        """Apply a start tag: implied ends, breaks, link targets, then push it."""
        if name == "body" or (name not in _HEAD_CONTENT and self.has("head")):
            self.close_through("head")
        if name in _SELF_CLOSING_SIBLINGS:
            self.close_recent(name)
        if name in _PARAGRAPH and self.top() == "p":
            self.close_through("p")
        if name in _PARAGRAPH:
            self.paragraph()
        elif name in _LINE:
            self.line()
        if name == "li" and not self.hidden:
            self.write("- ")
        if name in ("td", "th") and not self.newlines and not self.hidden:
            self.write("\t")
        if name in _VOID or (self_closing and name not in _RAW_TEXT):
            return
        if len(self.stack) >= MAX_STACK:
            self.limits_hit = True
            raise _Stop
        hides = name in _SKIPPED or "hidden" in attributes
        hides = hides or bool(_HIDDEN_STYLE.search(attributes.get("style", "")))
        hides = hides or not self.hidden_classes.isdisjoint(attributes.get("class", "").split())
        target = link_target(attributes.get("href", "")) if name == "a" else ""
        self.stack.append((name, hides, target, len(self.out)))
        self.hidden += hides
        self.pre += name == "pre"

    def end_tag(self, name: str) -> None:
        """Apply an end tag: pop to the matching open element, if any."""
        if name == "br":
            self.line()
            return
        if self.has(name):
            self.close_through(name)

    def close_recent(self, name: str) -> None:
        """Close `name` when it is among the few innermost open elements (a sibling starts)."""
        if any(entry[0] == name for entry in self.stack[-4:]):
            self.close_through(name)

    def close_through(self, name: str) -> None:
        """Pop open elements down to and including the innermost `name`."""
        while self.stack:
            popped, hides, target, opened_at = self.stack.pop()
            self.hidden -= hides
            self.pre -= popped == "pre"
            if target and not self.hidden and "".join(self.out[opened_at:]).strip() != target:
                self.write(f" <{target}>")
            if popped in _PARAGRAPH:
                self.paragraph()
            elif popped in _LINE:
                self.line()
            if popped == name:
                return

    def has(self, name: str) -> bool:
        """Tell whether `name` is open."""
        return any(entry[0] == name for entry in self.stack)

    def top(self) -> str:
        """Return the innermost open element's name ("" when none)."""
        return self.stack[-1][0] if self.stack else ""

    # --- output --------------------------------------------------------------------------------

    def write(self, chunk: str) -> None:
        """Append visible text."""
        if chunk:
            self.out.append(chunk)
            self.after_space = chunk[-1] in " \t"
            stripped = chunk.rstrip("\n")
            self.newlines = (
                min(2, len(chunk) - len(stripped))
                if stripped
                else min(2, self.newlines + len(chunk))
            )

    def line(self) -> None:
        """End the current line (once)."""
        if not self.hidden and not self.newlines:
            self.write("\n")

    def paragraph(self) -> None:
        """Leave one blank line."""
        if not self.hidden and self.newlines < 2:
            self.write("\n" * (2 - self.newlines))

    def text(self) -> str:
        """Return the collected text: lines trimmed, blank runs collapsed, controls removed."""
        lines = (line.rstrip(" \t") for line in "".join(self.out).split("\n"))
        joined = _BLANK_RUNS.sub("\n\n", "\n".join(lines))
        return clean_block(joined).strip("\n")


def link_target(href: str) -> str:
    """Return an absolute http(s)/mailto target fit to show as untrusted text, else ""."""
    target = href.strip("\t\n\f\r ").replace("\t", "").replace("\n", "").replace("\r", "")
    if not target or len(target.encode("utf-8", "replace")) > MAX_LINK_BYTES:
        return ""
    if _URL_UNSAFE.search(target):
        return ""
    try:
        parts = urlsplit(target)
        scheme = parts.scheme.lower()
        if scheme in ("http", "https"):
            if not parts.netloc or "@" in parts.netloc or not parts.hostname:
                return ""
            _ = parts.port  # raises ValueError for a malformed port
            return target
        if scheme == "mailto" and "@" in parts.path and not parts.netloc:
            return target
    except ValueError:
        return ""
    return ""


def html_to_text(source: str, *, max_input_bytes: int = MAX_INPUT_BYTES) -> HtmlText:
    """Convert HTML to readable text within the limits of tools.md §7.6; never raises.

    At most `max_input_bytes` (1 MiB by default) of the source's UTF-8 are read.
    """
    limits_hit = False
    limit = min(max(max_input_bytes, 0), MAX_INPUT_BYTES)
    if len(source) > limit // 4:
        data = source.encode("utf-8", "replace")
        if len(data) > limit:
            source, limits_hit = data[:limit].decode("utf-8", "ignore"), True
    extractor = _Extractor(source)
    with contextlib.suppress(_Stop):
        extractor.run()
    return HtmlText(extractor.text(), limits_hit or extractor.limits_hit)
