"""HTML built from escaped parts: the one way the console writes markup.

`Markup` is text that is already HTML. Every other value handed to `el` (text,
numbers, attribute values) is escaped with `html.escape`, so a task name, label
or output tail holding `<script>` renders as text. There is no way to insert
unescaped text except constructing `Markup` yourself, which this package does
only for literal markup it writes.
"""

from __future__ import annotations

import html
from collections.abc import Iterable
from typing import Union


class Markup(str):
    """A fragment of HTML, safe to concatenate as is."""

    __slots__ = ()


Child = Union["Markup", str, int, float, None, Iterable["Child"]]

# Elements without a closing tag.
_VOID = frozenset({"br", "hr", "img", "input", "link", "meta"})


def escape(value: object) -> Markup:
    """`value` as text: Markup passes through, everything else is escaped."""
    if isinstance(value, Markup):
        return value
    return Markup(html.escape(str(value), quote=True))


def join(children: Iterable[Child]) -> Markup:
    return Markup("".join(_render(child) for child in children))


def _render(child: Child) -> str:
    if child is None:
        return ""
    if isinstance(child, (str, int, float)):
        return escape(child)
    return join(child)


def _attrs(attrs: dict[str, object]) -> str:
    parts = []
    for name, value in attrs.items():
        if value is None or value is False:
            continue
        key = name.rstrip("_").replace("_", "-")
        parts.append(f" {key}" if value is True else f' {key}="{escape(value)}"')
    return "".join(parts)


def el(tag: str, *children: Child, **attrs: object) -> Markup:
    """`<tag attrs>children</tag>`; `class_` -> class, `data_x` -> data-x."""
    opening = f"<{tag}{_attrs(attrs)}>"
    if tag in _VOID:
        return Markup(opening)
    return Markup(f"{opening}{join(children)}</{tag}>")
