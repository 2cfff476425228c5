"""Docstrings as Markdown: reStructuredText simple tables, literal blocks and roles.

hookbus docstrings use a small part of reStructuredText: ````literal```` text (also
valid Markdown), roles such as ``:class:`hookbus.Hook```, ``Example::`` followed by an
indented literal block, and simple tables drawn with ``=`` borders. This module turns
that part into Markdown and reads the tables' cells, so that reference pages quote the
docstrings instead of repeating them.
"""

from __future__ import annotations

import inspect
import re
from dataclasses import dataclass

_BORDER = re.compile(r"^ *=+( +=+)+ *$")
_ROLE = re.compile(r":[a-z]+:`([^`]+)`")
_CODE = re.compile(r"(``[^`]+``|`[^`]+`)")


@dataclass(frozen=True)
class SimpleTable:
    """A parsed simple table: ``header`` (None when the table has none) and ``rows``."""

    header: list[str] | None
    rows: list[list[str]]

    def column(self, name: str) -> list[str]:
        """The cells of the column whose header starts with ``name`` (empty if none)."""
        if self.header is None:
            return []
        for index, title in enumerate(self.header):
            if title.startswith(name):
                return [row[index] for row in self.rows]
        return []

    def labelled(self, name: str) -> str | None:
        """The rest of the row whose first cell is ``name``, in a table without header."""
        for row in self.rows:
            if row[0] == name:
                return " ".join(cell for cell in row[1:] if cell)
        return None

    def cells(self, name: str) -> list[str]:
        """What the table says under ``name``: a header's column, or a labelled row."""
        labelled = self.labelled(name) if self.header is None else None
        return [labelled] if labelled is not None else self.column(name)

    def to_markdown(self) -> str:
        """The table in Markdown; a table without header becomes a list of labelled rows."""
        if self.header is None:
            return "\n".join(
                f"- **{row[0]}**: {prose(' '.join(c for c in row[1:] if c))}" for row in self.rows
            )
        lines = [
            "| " + " | ".join(self.header) + " |",
            "|" + "---|" * len(self.header),
        ]
        for row in self.rows:
            lines.append("| " + " | ".join(prose(cell).replace("|", "\\|") for cell in row) + " |")
        return "\n".join(lines)


def clean(docstring: str | None) -> str:
    """A docstring without its indentation and surrounding blank lines."""
    return inspect.cleandoc(docstring or "")


def summary_line(docstring: str | None) -> str:
    """The docstring's first paragraph on one line."""
    return " ".join(clean(docstring).split("\n\n")[0].split())


def find_table(docstring: str | None) -> SimpleTable | None:
    """The first simple table of the docstring, or None."""
    tables = [block for block in _blocks(clean(docstring)) if isinstance(block, SimpleTable)]
    return tables[0] if tables else None


def to_markdown(docstring: str | None, *, skip_summary: bool = False) -> str:
    """The docstring as Markdown: tables, ``Example::`` blocks as fenced code, roles as code."""
    parts: list[str] = []
    for index, block in enumerate(_blocks(clean(docstring))):
        if skip_summary and index == 0:
            continue
        if isinstance(block, SimpleTable):
            parts.append(block.to_markdown())
        elif isinstance(block, _Literal):
            parts.append("```python\n" + block.text + "\n```")
        else:
            parts.append(prose(block))
    return "\n\n".join(parts)


def prose(text: str) -> str:
    """One paragraph of reStructuredText as Markdown.

    Roles become code, ``<`` and ``>`` outside code are escaped (Markdown would take
    them for HTML), and lines are joined.
    """
    text = _ROLE.sub(r"``\1``", " ".join(text.split()))
    pieces = _CODE.split(text)
    return "".join(
        piece if _CODE.fullmatch(piece) else piece.replace("<", "&lt;").replace(">", "&gt;")
        for piece in pieces
    )


@dataclass(frozen=True)
class _Literal:
    text: str


def _blocks(text: str) -> list[str | SimpleTable | _Literal]:
    """Paragraphs, simple tables and literal blocks of a cleaned docstring, in order."""
    lines = text.splitlines()
    blocks: list[str | SimpleTable | _Literal] = []
    i = 0
    while i < len(lines):
        if not lines[i].strip():
            i += 1
        elif _BORDER.match(lines[i]):
            end = _table_end(lines, i)
            blocks.append(parse_simple_table(lines[i:end]))
            i = end
        else:
            start = i
            while i < len(lines) and lines[i].strip() and not _BORDER.match(lines[i]):
                i += 1
            paragraph = "\n".join(lines[start:i])
            if paragraph.endswith("::"):
                blocks.append(paragraph[:-1])
                i = _literal_block(lines, i, blocks)
            else:
                blocks.append(paragraph)
    return blocks


def _literal_block(lines: list[str], i: int, blocks: list[str | SimpleTable | _Literal]) -> int:
    """Append the indented block after a ``::`` paragraph; returns the line after it."""
    body: list[str] = []
    while i < len(lines) and (not lines[i].strip() or lines[i].startswith(" ")):
        body.append(lines[i])
        i += 1
    while body and not body[-1].strip():
        body.pop()
    blocks.append(_Literal(inspect.cleandoc("\n".join(body))))
    return i


def _table_end(lines: list[str], start: int) -> int:
    """The index after the closing border of the table opened at ``start``."""
    borders = [start]
    i = start + 1
    while i < len(lines) and lines[i].strip():
        if _BORDER.match(lines[i]):
            borders.append(i)
        i += 1
    return borders[-1] + 1


def parse_simple_table(lines: list[str]) -> SimpleTable:
    """Parse a reStructuredText simple table, borders included.

    Columns start where the first border's ``=`` runs start. A line whose first cell is
    blank continues the row above, as in reStructuredText; so does a line after a row
    whose first cell ends with a comma (``on_end``, then ``on_exception`` below it).
    Three borders mean the row between the first two is the header.
    """
    starts = [match.start() for match in re.finditer(r"=+", lines[0])]
    borders = [i for i, line in enumerate(lines) if _BORDER.match(line)]
    header = _rows(lines[borders[0] + 1 : borders[1]], starts)[0] if len(borders) > 2 else None
    body = lines[borders[-2] + 1 : borders[-1]]
    return SimpleTable(header=header, rows=_rows(body, starts))


def _rows(lines: list[str], starts: list[int]) -> list[list[str]]:
    rows: list[list[str]] = []
    for line in lines:
        bounds = [*starts[1:], None]
        cells = [line[start:end].strip() for start, end in zip(starts, bounds, strict=True)]
        continues = rows and (not cells[0] or rows[-1][0].endswith(","))
        if continues:
            rows[-1] = [" ".join(filter(None, pair)) for pair in zip(rows[-1], cells, strict=True)]
        else:
            rows.append(cells)
    return rows
