"""HTML → plain text: one renderer, two rule sets. Linear; nothing is fetched, run or rendered.

READING turns mail HTML into readable text: it reads at most 1 MiB, 20,000 tokens of at most
64 KiB and 128 open elements (a limit ends the text and is reported), hides content hidden
inline or by a style-sheet class, shows safe link targets and keeps paragraphs as blank lines.
COMPOSING derives the plain alternative of the caller's own HTML: fixed line breaks around
br p div li tr blockquote pre h1-h6, a space after table cells, no limit on tokens or text,
and more than 512 open elements reported so the caller fails closed. Both run on the
tokenizer of providers.mime.html_tokens.
"""

from __future__ import annotations

import contextlib
import html
import html.entities
import re
from urllib.parse import urlsplit

from msgspec import Struct, structs

from providers.mime.cleaning import clean_block
from providers.mime.html_tokens import RAW_TEXT, HtmlTokenizer, Stop, TokenLimits

MAX_INPUT_BYTES = 1024 * 1024
MAX_TOKEN_BYTES = 64 * 1024
# Tags are bounded in characters (they are ASCII in practice); data runs in UTF-8 bytes.
MAX_TAG_CHARS = 64 * 1024
MAX_TOKENS = 20_000
MAX_STACK = 128
MAX_LINK_BYTES = 2048
MAX_COMPOSE_DEPTH = 512

_VOID = frozenset(
    {"area", "base", "br", "col", "embed", "hr", "img", "input", "link", "meta", "param"}
    | {"source", "track", "wbr", "basefont", "bgsound", "frame", "keygen"}
)
# Start tags that close an open <p> (HTML's implied end tags, simplified).
_CLOSES_P = frozenset(
    {"p", "h1", "h2", "h3", "h4", "h5", "h6", "table", "ul", "ol", "dl", "blockquote", "pre"}
    | {"hr", "address", "figure", "form", "fieldset", "center", "section", "article"}
)
# Start tags that close an open element of the same name (HTML's implied end tags, simplified).
_SELF_CLOSING_SIBLINGS = frozenset({"p", "li", "dt", "dd", "tr", "td", "th", "option", "a"})
_HEAD_CONTENT = frozenset(
    {"title", "meta", "link", "style", "script", "base", "noscript", "template"}
)
_HEADINGS = frozenset({"h1", "h2", "h3", "h4", "h5", "h6"})

_SPACES = re.compile(r"[\t\n\f\r ]+")
_HIDDEN_STYLE = re.compile(r"display\s*:\s*none|visibility\s*:\s*hidden", re.IGNORECASE)
_BLANK_RUNS = re.compile(r"\n{3,}")
_CLASS_SELECTOR = re.compile(r"[A-Za-z0-9_-]*\.([A-Za-z0-9_-]+)")
_MAX_HIDDEN_CLASSES = 1000
_URL_UNSAFE = re.compile(r"[\x00-\x20\x7f-\x9f\"<>\\^`{|}]")
# The reference syntax html.unescape recognises; the named table is its own.
_CHARREF = re.compile(r"&(#[0-9]+;?|#[xX][0-9a-fA-F]+;?|[^\t\n\f <&#;]{1,32};?)")
_NAMED = html.entities.html5


class HtmlRules(Struct, frozen=True):
    """What one use of the renderer shows, where it breaks lines, and its limits."""

    skipped: frozenset[str]  # elements whose content never shows
    paragraphs: frozenset[str]  # a blank line before and after
    lines: frozenset[str]  # a line break before and after
    after: dict[str, str]  # text written after an element's content
    limits: TokenLimits
    max_stack: int
    max_input_bytes: int | None
    collapse_spaces: bool  # runs of HTML whitespace become one space (outside pre)
    bullets: bool  # "- " before each list item
    cell_tabs: bool  # a tab before a table cell that does not start a line
    hiding: bool  # hidden attributes, inline styles and style-sheet classes hide content
    head_ends_early: bool  # body content ends an unclosed head (as HTML parsers do)
    links: bool  # safe link targets follow their label
    keep_controls: bool  # a reference to a control code point yields it (see decode_references)


def decode_references(text: str, *, keep_controls: bool = False) -> str:
    """Decode character references exactly like `html.unescape`, within bounds.

    A numeric reference of more than eight significant digits is out of Unicode's range and
    becomes U+FFFD without converting the digits (`html.unescape` raises past 4,300 digits).
    With `keep_controls`, a reference to a control code point yields that code point where
    `html.unescape` drops it, so a body validator can refuse it.
    """
    if "&" not in text:
        return text
    return _CHARREF.sub(_keeping_controls if keep_controls else _reference, text)


def _reference(match: re.Match[str]) -> str:
    ref = match.group(1)
    if ref[0] != "#":
        named = _NAMED.get(ref)
        return named if named is not None else html.unescape(match.group(0))
    hexadecimal = ref[1] in "xX"
    digits = ref[2 if hexadecimal else 1 :].rstrip(";").lstrip("0")
    if len(digits) > 8:
        return "\ufffd"
    return html.unescape(("&#x" if hexadecimal else "&#") + (digits or "0") + ";")


def _keeping_controls(match: re.Match[str]) -> str:
    decoded = _reference(match)
    ref = match.group(1)
    if decoded or ref[0] != "#":
        return decoded
    # html.unescape returns "" only for code points it refuses, all below U+110000.
    hexadecimal = ref[1] in "xX"
    digits = ref[2 if hexadecimal else 1 :].rstrip(";").lstrip("0")
    return chr(int(digits, 16 if hexadecimal else 10))


READING = HtmlRules(
    skipped=frozenset(
        {"script", "style", "head", "template", "noscript", "iframe", "object", "title", "svg"}
        | {"math", "select", "noembed", "noframes", "applet", "canvas", "audio", "video"}
    ),
    paragraphs=_CLOSES_P,
    lines=frozenset(
        {"div", "br", "li", "tr", "dt", "dd", "header", "footer", "nav", "aside", "main"}
        | {"caption", "figcaption", "legend", "details", "summary", "tbody", "thead", "tfoot"}
        | {"body", "html"}
    ),
    after={},
    limits=TokenLimits(MAX_TOKENS, MAX_TAG_CHARS, MAX_TOKEN_BYTES),
    max_stack=MAX_STACK,
    max_input_bytes=MAX_INPUT_BYTES,
    collapse_spaces=True,
    bullets=True,
    cell_tabs=True,
    hiding=True,
    head_ends_early=True,
    links=True,
    keep_controls=False,
)
COMPOSING = HtmlRules(
    skipped=frozenset({"head", "script", "style", "template", "noscript", "iframe", "object"}),
    paragraphs=frozenset(),
    lines=frozenset({"br", "p", "div", "li", "tr", "blockquote", "pre"}) | _HEADINGS,
    after={"td": " ", "th": " "},
    limits=TokenLimits(attributes=False),
    max_stack=MAX_COMPOSE_DEPTH,
    max_input_bytes=None,
    collapse_spaces=False,
    bullets=False,
    cell_tabs=False,
    hiding=False,
    head_ends_early=False,
    links=False,
    keep_controls=True,
)


class HtmlText(Struct, frozen=True):
    """The text extracted from HTML, and whether any extraction limit was hit."""

    text: str
    limits_hit: bool


class _Renderer(HtmlTokenizer):
    """One rendering: tokens in, text pieces out to `out`, under one rule set."""

    def __init__(self, source: str, rules: HtmlRules) -> None:
        super().__init__(source, rules.limits)
        self.rules = rules
        self.out: list[str] = []
        # name, hides its content, link target, len(out) when opened
        self.stack: list[tuple[str, bool, str, int]] = []
        self.open_count: dict[str, int] = {}  # open elements by name: has() in O(1)
        self.hidden = 0
        self.pre = 0
        self.newlines = 2  # trailing line breaks of the output so far (0-2)
        self.after_space = False  # the output ends with a space or tab
        self.hidden_classes: set[str] = set()

    # --- tokens --------------------------------------------------------------------------------

    def handle_raw_text(self, name: str, chunk: str) -> None:
        """Read a style sheet's hiding classes, then handle the content as text."""
        if name == "style" and self.rules.hiding:
            self.note_hidden_classes(chunk[:MAX_TAG_CHARS])
        self.handle_text(chunk)

    def note_hidden_classes(self, css: str) -> None:
        """Remember classes a style sheet hides, so hidden preheader text stays hidden."""
        for rule in css.split("}"):
            selectors, brace, declarations = rule.partition("{")
            if brace and _HIDDEN_STYLE.search(declarations):
                for selector in selectors.split(","):
                    simple = _CLASS_SELECTOR.fullmatch(selector.strip())
                    if simple and len(self.hidden_classes) < _MAX_HIDDEN_CLASSES:
                        self.hidden_classes.add(simple.group(1))

    def handle_text(self, chunk: str) -> None:
        """Write a run of text: references decoded, whitespace collapsed where the rules say."""
        if self.hidden:
            return
        chunk = decode_references(chunk, keep_controls=self.rules.keep_controls)
        if not self.rules.collapse_spaces:
            self.write(chunk)
        elif self.pre:
            self.write(chunk.replace("\r\n", "\n"))
        else:
            chunk = _SPACES.sub(" ", chunk)
            if self.newlines or self.after_space:
                chunk = chunk.lstrip(" ")
            self.write(chunk)

    # --- elements ------------------------------------------------------------------------------

    def handle_start(self, name: str, attributes: dict[str, str], self_closing: bool) -> None:
        """Apply a start tag: implied ends, breaks, link targets, then push it."""
        rules = self.rules
        if rules.head_ends_early and (
            name == "body" or (name not in _HEAD_CONTENT and self.has("head"))
        ):
            self.close_through("head")
        if name in _SELF_CLOSING_SIBLINGS:
            self.close_recent(name)
        if name in _CLOSES_P and self.top() == "p":
            self.close_through("p")
        if name in rules.paragraphs:
            self.paragraph()
        elif name in rules.lines:
            self.line()
        if rules.bullets and name == "li" and not self.hidden:
            self.write("- ")
        if rules.cell_tabs and name in ("td", "th") and not self.newlines and not self.hidden:
            self.write("\t")
        if name in _VOID or (self_closing and name not in RAW_TEXT):
            self.write_after(name)
            return
        if len(self.stack) >= rules.max_stack:
            self.limits_hit = True
            raise Stop
        hides = name in rules.skipped
        if rules.hiding and not hides:
            hides = "hidden" in attributes
            hides = hides or bool(_HIDDEN_STYLE.search(attributes.get("style", "")))
            classes = attributes.get("class", "").split()
            hides = hides or not self.hidden_classes.isdisjoint(classes)
        target = link_target(attributes.get("href", "")) if rules.links and name == "a" else ""
        self.stack.append((name, hides, target, len(self.out)))
        self.open_count[name] = self.open_count.get(name, 0) + 1
        self.hidden += hides
        self.pre += name == "pre"

    def handle_end(self, name: str) -> None:
        """Apply an end tag: pop to the matching open element, if any."""
        if name == "br":
            self.line()
            return
        if self.has(name):
            self.close_through(name)

    def close_recent(self, name: str) -> None:
        """Close `name` when it is among the few innermost open elements (a sibling starts)."""
        for entry in self.stack[-4:]:
            if entry[0] == name:
                self.close_through(name)
                return

    def close_through(self, name: str) -> None:
        """Pop open elements down to and including the innermost `name`."""
        while self.stack:
            popped, hides, target, opened_at = self.stack.pop()
            self.open_count[popped] -= 1
            self.hidden -= hides
            self.pre -= popped == "pre"
            if target and not self.hidden and "".join(self.out[opened_at:]).strip() != target:
                self.write(f" <{target}>")
            if popped in self.rules.paragraphs:
                self.paragraph()
            elif popped in self.rules.lines:
                self.line()
            self.write_after(popped)
            if popped == name:
                return

    def has(self, name: str) -> bool:
        """Tell whether `name` is open."""
        return self.open_count.get(name, 0) > 0

    def top(self) -> str:
        """Return the innermost open element's name ("" when none)."""
        return self.stack[-1][0] if self.stack else ""

    # --- output --------------------------------------------------------------------------------

    def write(self, chunk: str) -> None:
        """Append visible text."""
        if not chunk:
            return
        self.out.append(chunk)
        last = chunk[-1]
        self.after_space = last in " \t"
        if last != "\n":
            self.newlines = 0
            return
        stripped = chunk.rstrip("\n")
        self.newlines = (
            min(2, len(chunk) - len(stripped)) if stripped else min(2, self.newlines + len(chunk))
        )

    def write_after(self, name: str) -> None:
        """Write what the rules put after an element (a space after a table cell)."""
        text = self.rules.after.get(name)
        if text and not self.hidden:
            self.write(text)

    def line(self) -> None:
        """End the current line (once)."""
        if not self.hidden and not self.newlines:
            self.write("\n")

    def paragraph(self) -> None:
        """Leave one blank line."""
        if not self.hidden and self.newlines < 2:
            self.write("\n" * (2 - self.newlines))


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


def render(source: str, rules: HtmlRules) -> HtmlText:
    """Render `source` under `rules`; the text is as written, before any final cleanup."""
    limits_hit = False
    if rules.max_input_bytes is not None:
        limit = min(max(rules.max_input_bytes, 0), MAX_INPUT_BYTES)
        if len(source) > limit // 4:
            data = source.encode("utf-8", "replace")
            if len(data) > limit:
                source, limits_hit = data[:limit].decode("utf-8", "ignore"), True
    renderer = _Renderer(source, rules)
    with contextlib.suppress(Stop):
        renderer.run()
    return HtmlText("".join(renderer.out), limits_hit or renderer.limits_hit)


def html_to_text(source: str, *, max_input_bytes: int = MAX_INPUT_BYTES) -> HtmlText:
    """Convert mail HTML to readable text within the READING limits; never raises.

    At most `max_input_bytes` (1 MiB by default) of the source's UTF-8 are read.
    """
    rules = READING
    if max_input_bytes != rules.max_input_bytes:
        rules = structs.replace(READING, max_input_bytes=max_input_bytes)
    rendered = render(source, rules)
    lines = (line.rstrip(" \t") for line in rendered.text.split("\n"))
    joined = _BLANK_RUNS.sub("\n\n", "\n".join(lines))
    return HtmlText(clean_block(joined).strip("\n"), rendered.limits_hit)
