"""Quotations of a source message: reply attribution and `> ` lines, forward blocks, HTML forms.

Source HTML is never used: the HTML forms escape the source's decoded plain text.
"""

from __future__ import annotations

from providers.mime.compose.dates import attribution_date, rfc1123z
from providers.mime.compose.source import SourceHeaders
from providers.mime.compose.text_rules import escape_html, normalize_newlines

NO_TEXT_PLACEHOLDER = "[No decoded text body available]"
FORWARD_SEPARATOR = "---------- Forwarded message ----------"
HTML_FORWARD_HEADING = "<hr><p><strong>Forwarded message</strong></p>"


def source_body(text: str) -> str:
    """Normalize the source text for quoting; the placeholder when it is empty."""
    body = normalize_newlines(text).rstrip("\n")
    return body if body else NO_TEXT_PLACEHOLDER


def author(headers: SourceHeaders) -> str:
    """The readable From list, or `the sender` when nothing usable remains."""
    return headers.from_.readable() or "the sender"


def attribution(headers: SourceHeaders) -> str:
    """`On <date>, <author> wrote:`, or `<author> wrote:` without a usable date."""
    if headers.date is None:
        return f"{author(headers)} wrote:"
    return f"On {attribution_date(headers.date)}, {author(headers)} wrote:"


def _with_commentary(commentary: str, block: str) -> str:
    lead = commentary.rstrip("\n")
    return f"{lead}\n\n{block}" if lead else block


def _html_lines(text: str) -> str:
    return escape_html(text).replace("\n", "<br>\n")


def reply_text(commentary: str, headers: SourceHeaders, body: str) -> str:
    """Commentary, blank line, attribution, then each source line as `> line` (`>` if empty)."""
    quoted = "\n".join(f"> {line}" if line else ">" for line in body.split("\n"))
    return _with_commentary(commentary, f"{attribution(headers)}\n{quoted}")


def reply_html(authored_html: str, headers: SourceHeaders, body: str) -> str:
    """Authored HTML plus an escaped `<p>` attribution and `<blockquote type="cite">`."""
    return (
        f"{authored_html}\n<p>{escape_html(attribution(headers))}</p>\n"
        f'<blockquote type="cite">{_html_lines(body)}</blockquote>'
    )


def forward_metadata(headers: SourceHeaders) -> str:
    """The `From:`, `Date:`, `Subject:`, `To:`, `Cc:` lines, each only when non-empty."""
    lines = [
        ("From", headers.from_.readable()),
        ("Date", rfc1123z(headers.date) if headers.date is not None else ""),
        ("Subject", headers.subject),
        ("To", headers.to.readable()),
        ("Cc", headers.cc.readable()),
    ]
    return "\n".join(f"{name}: {value}" for name, value in lines if value)


def forward_text(commentary: str, headers: SourceHeaders, body: str) -> str:
    """Commentary, blank line, the separator, metadata lines, blank line, source text."""
    block = f"{FORWARD_SEPARATOR}\n{forward_metadata(headers)}\n\n{body}"
    return _with_commentary(commentary, block)


def forward_html(authored_html: str, headers: SourceHeaders, body: str) -> str:
    """Authored HTML plus `<hr>` heading and the escaped metadata and source in a `<div>`."""
    inner = _html_lines(f"{forward_metadata(headers)}\n\n{body}")
    return f"{authored_html}\n{HTML_FORWARD_HEADING}\n<div>{inner}</div>"
