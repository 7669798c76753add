"""Source Date parsing (RFC 5322, strict zones) and the two date formats quotations use."""

from __future__ import annotations

import re
from datetime import datetime, timedelta, timezone

from providers.mime.compose.thread_ids import strip_comments

_MONTHS = ("Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec")
_WEEKDAYS = ("Mon", "Tue", "Wed", "Thu", "Fri", "Sat", "Sun")
_ZONES = {
    "UT": 0, "UTC": 0, "GMT": 0, "EST": -5, "EDT": -4, "CST": -6, "CDT": -5,
    "MST": -7, "MDT": -6, "PST": -8, "PDT": -7,
}  # fmt: skip
_DATE = re.compile(
    r"(?:(?P<weekday>[A-Za-z]{3})\s*,\s*)?"
    r"(?P<day>\d{1,2})\s+(?P<month>[A-Za-z]{3})\s+(?P<year>\d{4})\s+"
    r"(?P<hour>\d{2}):(?P<minute>\d{2})(?::(?P<second>\d{2}))?\s*"
    r"(?P<zone>[+-]\d{4}|[A-Za-z]+)"
)


def parse_source_date(value: str) -> datetime | None:
    """Parse a source Date in its own offset; None when missing, malformed or zone unknown."""
    text = strip_comments(value)
    if text is None:
        return None
    match = _DATE.fullmatch(text.strip())
    if match is None:
        return None
    month = match["month"].capitalize()
    if month not in _MONTHS:
        return None
    zone = match["zone"]
    if zone[0] in "+-":
        hours, minutes = int(zone[1:3]), int(zone[3:5])
        if hours >= 24 or minutes >= 60:
            return None
        offset = timedelta(hours=hours, minutes=minutes) * (-1 if zone[0] == "-" else 1)
    elif zone in _ZONES:
        offset = timedelta(hours=_ZONES[zone])
    else:
        return None
    try:
        return datetime(
            int(match["year"]),
            _MONTHS.index(month) + 1,
            int(match["day"]),
            int(match["hour"]),
            int(match["minute"]),
            int(match["second"] or 0),
            tzinfo=timezone(offset),
        )
    except ValueError:
        return None


def _zone(moment: datetime) -> str:
    offset = moment.utcoffset() or timedelta(0)
    sign = "-" if offset < timedelta(0) else "+"
    minutes = abs(int(offset.total_seconds())) // 60
    return f"{sign}{minutes // 60:02d}{minutes % 60:02d}"


def attribution_date(moment: datetime) -> str:
    """Format like `Tue, 6 Oct 2026 at 17:00 +0000` in the moment's own offset."""
    return (
        f"{_WEEKDAYS[moment.weekday()]}, {moment.day} {_MONTHS[moment.month - 1]} "
        f"{moment.year} at {moment.hour:02d}:{moment.minute:02d} {_zone(moment)}"
    )


def rfc1123z(moment: datetime) -> str:
    """Format like `Tue, 06 Oct 2026 17:00:00 +0000` (RFC 1123 with a numeric zone)."""
    return (
        f"{_WEEKDAYS[moment.weekday()]}, {moment.day:02d} {_MONTHS[moment.month - 1]} "
        f"{moment.year:04d} {moment.hour:02d}:{moment.minute:02d}:{moment.second:02d} "
        f"{_zone(moment)}"
    )
