"""The plain alternative derived from authored HTML; nothing is fetched.

Only ever fed the caller's own HTML, never a source message's HTML. The HTML is read by the
same renderer as mail (providers.mime.html_text) under its composition rules.
"""

from __future__ import annotations

import re

from providers.mime.compose.text_rules import is_valid_body, normalize_newlines
from providers.mime.html_text import COMPOSING, render
from schemas.errors import InvalidArguments

_FAILED = (
    "could not derive a plain-text alternative from message.html; provide message.text "
    "explicitly or simplify the HTML"
)
# Whitespace as str.split() sees it, except the line break.
_INLINE_SPACE = re.compile(r"[^\S\n]+")
_LINE_EDGE_SPACE = re.compile(r" ?\n ?")
_EMPTY_LINES = re.compile(r"\n{2,}")


def derive_plain_text(source_html: str) -> str:
    """Derive the plain alternative from authored HTML; raise InvalidArguments when it fails."""
    rendered = render(source_html, COMPOSING)
    if rendered.limits_hit:  # nested deeper than the renderer accepts
        raise InvalidArguments(_FAILED)
    if not is_valid_body(rendered.text):
        raise InvalidArguments(_FAILED)
    # Within each line whitespace runs become one space; empty lines are dropped.
    text = _INLINE_SPACE.sub(" ", normalize_newlines(rendered.text))
    text = _EMPTY_LINES.sub("\n", _LINE_EDGE_SPACE.sub("\n", text)).strip(" \n")
    if not is_valid_body(text):
        raise InvalidArguments(_FAILED)
    return text
