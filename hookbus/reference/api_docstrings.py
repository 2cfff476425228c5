"""The docs' API page (docs/reference/api.md): hookbus docstrings as Markdown for mkdocstrings.

mkdocs.yml loads :class:`MarkdownDocstrings` as a griffe extension of mkdocstrings'
Python handler, which reads the package's source laid out as installed
(:mod:`hookbus.reference.api_sources`).
"""

from __future__ import annotations

import inspect
import re
from typing import Any

import griffe

from hookbus.reference.docstrings import to_markdown

_SECTION = re.compile(r"^(Args|Returns|Raises):\n(?:(?: .*)?\n)*", re.M)
"""A Google-style section (``Args:`` and its indented lines), which mkdocstrings parses."""
_ROLE = re.compile(r":[a-z]+:`([^`]+)`")


def docstring_markdown(docstring: str) -> str:
    """``docstring`` in Markdown: its reStructuredText as :func:`to_markdown` turns it,
    its Google-style sections kept for mkdocstrings to lay out (roles there become code)."""
    text = inspect.cleandoc(docstring) + "\n"
    parts, start = [], 0
    for section in _SECTION.finditer(text):
        parts += [to_markdown(text[start : section.start()]), _ROLE.sub(r"``\1``", section[0])]
        start = section.end()
    parts.append(to_markdown(text[start:]))
    return "\n\n".join(part.strip("\n") for part in parts if part.strip())


class MarkdownDocstrings(griffe.Extension):
    """Turns each docstring's reStructuredText (simple tables, ``Example::`` blocks,
    roles) into Markdown, as the generated reference pages do."""

    def on_instance(self, *, obj: griffe.Object, **kwargs: Any) -> None:
        if obj.docstring is not None:
            obj.docstring.value = docstring_markdown(obj.docstring.value)
