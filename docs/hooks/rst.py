"""reStructuredText in docstrings, as the Markdown the site renders: roles
(``:func:`~gnntrain.fit```) and double backticks become code spans, ``::`` literal blocks
fenced code. Used by the generated pages (:mod:`reference`) and, as a griffe extension,
by the API pages (:class:`RstToMarkdown`)."""

from __future__ import annotations

import inspect
import re
from typing import Any

import griffe

_ROLE = re.compile(r":\w+:`~?([^`]+)`")


def md_text(doc: str | None) -> str:
    """A docstring's reStructuredText roles and double backticks as Markdown code spans."""
    text = inspect.cleandoc(doc or "")
    text = _ROLE.sub(r"`\1`", text)
    return text.replace("``", "`").replace("::\n", ":\n")


def rst_to_md(doc: str) -> str:
    """A docstring's text as Markdown: each ``::`` literal block (the indented lines after a
    line ending in ``::``) becomes a fenced code block; roles and double backticks become
    code spans outside the blocks."""
    out: list[str] = []
    lines = inspect.cleandoc(doc).splitlines()
    i = 0
    while i < len(lines):
        line = lines[i]
        if line.rstrip().endswith("::"):
            lead = line.rstrip()[:-2].rstrip()
            if lead:
                out.append(md_text(lead + ":"))
            i += 1
            block: list[str] = []
            while i < len(lines) and (not lines[i].strip() or lines[i].startswith(" ")):
                block.append(lines[i])
                i += 1
            while block and not block[-1].strip():
                block.pop()
            body = inspect.cleandoc("\n".join(block)) if block else ""
            out += ["", "```text", body, "```", ""]
            continue
        out.append(md_text(line) if line.strip() else "")
        i += 1
    return "\n".join(out)


class RstToMarkdown(griffe.Extension):
    """Every docstring mkdocstrings renders, converted by :func:`rst_to_md`."""

    def on_object(self, *, obj: griffe.Object, loader: griffe.GriffeLoader, **kwargs: Any) -> None:
        if obj.docstring is not None:
            obj.docstring.value = rst_to_md(obj.docstring.value)
