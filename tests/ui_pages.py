"""Reading the viewer's pages back in tests: elements by class, with their attributes and
text, as a browser's DOM would give them (entities decoded)."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from html.parser import HTMLParser
from typing import Any

VOID = {"area", "base", "br", "col", "embed", "hr", "img", "input", "link", "meta", "source"}


@dataclass
class Element:
    """One element: its tag, attributes and text content, and the elements inside it."""

    tag: str
    attrs: dict[str, str]
    children: list[Element] = field(default_factory=list)
    text: str = ""

    @property
    def classes(self) -> set[str]:
        return set(self.attrs.get("class", "").split())

    def find_all(self, cls: str | None = None, tag: str | None = None) -> list[Element]:
        """Every element below this one (in document order) with the class and tag."""
        out = []
        for child in self.children:
            if (cls is None or cls in child.classes) and (tag is None or child.tag == tag):
                out.append(child)
            out += child.find_all(cls, tag)
        return out

    def find(self, cls: str | None = None, tag: str | None = None) -> Element | None:
        found = self.find_all(cls, tag)
        return found[0] if found else None

    def by_id(self, ident: str) -> Element | None:
        for element in [self, *self.find_all()]:
            if element.attrs.get("id") == ident:
                return element
        return None


class _Builder(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.root = Element("document", {})
        self.stack = [self.root]

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        element = Element(tag, {k: v or "" for k, v in attrs})
        self.stack[-1].children.append(element)
        if tag not in VOID:
            self.stack.append(element)

    def handle_endtag(self, tag: str) -> None:
        for depth in range(len(self.stack) - 1, 0, -1):
            if self.stack[depth].tag == tag:
                del self.stack[depth:]
                return

    def handle_data(self, data: str) -> None:
        for element in self.stack:
            element.text += data


def parse(html: str) -> Element:
    """The page as a tree of elements."""
    builder = _Builder()
    builder.feed(html)
    builder.close()
    return builder.root


def embedded_json(page: Element, ident: str) -> Any:
    """The JSON a ``<script type="application/json" id=...>`` holds."""
    script = page.by_id(ident)
    assert script is not None, f"no #{ident} in the page"
    return json.loads(script.text)
