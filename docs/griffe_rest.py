"""Griffe extension for the API reference: render the project's reST-flavoured docstrings.

The docstrings are written for ``help()`` and doctest: ``>>>`` examples, reST roles
(``:class:`~stores.X```) and ``::`` literal blocks. Markdown would read ``>>>`` as nested
block quotes and ``[1, 2]`` in an example's output as a link reference, which fails the
strict build. This extension, loaded by mkdocstrings (``extensions`` in ``mkdocs.yml``),
rewrites each docstring before it is parsed: doctest runs and ``::`` blocks become fenced
code, roles become inline code. The source files are not touched.
"""

from __future__ import annotations

import re
from typing import Any

import griffe

_ROLE = re.compile(r":(?:class|func|meth|attr|exc|mod|data|obj):`~?\.?([^`]+)`")
_FENCE = re.compile(r"^\s*(```|~~~)")


def _indent(line: str) -> int:
    return len(line) - len(line.lstrip())


def rest_to_markdown(text: str) -> str:
    """Fence doctest runs and ``::`` literal blocks, turn reST roles into inline code.

    Fenced blocks already in the text are left as they are.
    """
    text = _ROLE.sub(lambda m: f"`{m.group(1).rsplit('.', 1)[-1]}`", text)
    lines = text.splitlines()
    out: list[str] = []
    i = 0
    in_fence = False
    while i < len(lines):
        line = lines[i]
        if _FENCE.match(line):
            in_fence = not in_fence
            out.append(line)
            i += 1
            continue
        if in_fence:
            out.append(line)
            i += 1
            continue
        if line.lstrip().startswith(">>>"):
            pad = " " * _indent(line)
            out.append(f"{pad}```pycon")
            while i < len(lines) and lines[i].strip():
                out.append(lines[i])
                i += 1
            out.append(f"{pad}```")
            continue
        if line.rstrip().endswith("::") and not line.rstrip().endswith(":::"):
            # reST literal block: "text::" then a blank line and an indented block.
            base = _indent(line)
            stripped = line.rstrip()[:-2].rstrip()
            out.append(stripped + ":" if stripped else "")
            j = i + 1
            while j < len(lines) and not lines[j].strip():
                j += 1
            if j < len(lines) and _indent(lines[j]) > base:
                block_indent = _indent(lines[j])
                out.append("")
                out.append(" " * base + "```")
                while j < len(lines) and (
                    not lines[j].strip() or _indent(lines[j]) >= block_indent
                ):
                    out.append(" " * base + lines[j][block_indent:])
                    j += 1
                while out and not out[-1].strip():
                    out.pop()
                out.append(" " * base + "```")
                out.append("")
                i = j
                continue
        out.append(line)
        i += 1
    return "\n".join(out)


class RestDocstrings(griffe.Extension):
    """Rewrite every docstring with :func:`rest_to_markdown` when its object is loaded."""

    def on_instance(self, *, obj: griffe.Object, **kwargs: Any) -> None:
        if obj.docstring is not None:
            obj.docstring.value = rest_to_markdown(obj.docstring.value)
