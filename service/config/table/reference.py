"""Render the variable table as the Markdown reference of docs/configuration.md."""

from __future__ import annotations

from typing import Final

from service.config.table.variables import GROUPS, VARIABLES, Variable

BEGIN: Final = "<!-- variables: generated from service/config/table/variables.py -->"
END: Final = "<!-- variables: end -->"
HEADER: Final = "| Variable | Default | Rule | Effect |\n| --- | --- | --- | --- |"


def markdown_reference() -> str:
    """One section per group: a heading, its intro and a table of its variables."""
    sections = []
    for group in GROUPS:
        rows = [_row(v) for v in VARIABLES if v.group == group.key]
        sections.append(f"### {group.title}\n\n{group.intro}\n\n{HEADER}\n" + "\n".join(rows))
    return "\n\n".join(sections)


def _row(variable: Variable) -> str:
    notes = []
    if variable.secret:
        notes.append("secret")
    if not variable.in_env_file:
        notes.append("environment only")
    name = f"`{variable.name}`" + (f" ({', '.join(notes)})" if notes else "")
    cells = (name, variable.default, variable.rule, variable.effect)
    return "| " + " | ".join(cell.replace("|", "\\|") for cell in cells) + " |"


def replace_reference(page: str) -> str:
    """Return the page with the text between the markers replaced by the current reference."""
    start = page.index(BEGIN) + len(BEGIN)
    end = page.index(END, start)
    return page[:start] + "\n\n" + markdown_reference() + "\n\n" + page[end:]
