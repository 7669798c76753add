"""Every relative link in README.md and docs/*.md names an existing file (and heading)."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")
FENCE = re.compile(r"^```.*?^```", re.MULTILINE | re.DOTALL)
HEADING = re.compile(r"^#{1,6}\s+(.+?)\s*#*$", re.MULTILINE)


def anchors(markdown: str) -> set[str]:
    """The anchors GitHub derives from a page's headings (duplicates get -1, -2, ...)."""
    found: set[str] = set()
    for title in HEADING.findall(FENCE.sub("", markdown)):
        slug = re.sub(r"[^\w\- ]", "", title.replace("`", "").lower()).replace(" ", "-")
        unique, n = slug, 0
        while unique in found:
            n += 1
            unique = f"{slug}-{n}"
        found.add(unique)
    return found


def broken_links(page: Path) -> list[str]:
    """The relative links of one page whose file or anchor does not exist."""
    text = page.read_text(encoding="utf-8")
    broken = []
    for target in LINK.findall(FENCE.sub("", text)):
        if re.match(r"[a-z][a-z0-9+.-]*:", target):  # http:, https:, mailto: ...
            continue
        path, _, anchor = target.partition("#")
        linked = (page.parent / path).resolve() if path else page
        if not resolves(linked, anchor):
            broken.append(target)
    return broken


def resolves(linked: Path, anchor: str) -> bool:
    """Tell whether the file exists and, when an anchor is given, has that heading."""
    if not linked.is_file():
        return False
    return not anchor or anchor in anchors(linked.read_text(encoding="utf-8"))


def test_every_relative_link_in_the_user_docs_resolves() -> None:
    pages = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
    assert {} == {p.name: bad for p in pages if (bad := broken_links(p))}


def test_a_missing_file_or_heading_is_reported(tmp_path: Path) -> None:
    (tmp_path / "other.md").write_text("# Real heading\n", encoding="utf-8")
    page = tmp_path / "page.md"
    page.write_text(
        "[ok](other.md#real-heading) [gone](missing.md) [bad](other.md#nope) [here](#top)\n"
        "# Top\n```\n[in code](ignored.md)\n```\n",
        encoding="utf-8",
    )
    assert ["missing.md", "other.md#nope"] == broken_links(page)
