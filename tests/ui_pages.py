"""Reading the viewer's pages back in tests: elements by class, with their attributes and
text, as a browser's DOM would give them (entities decoded)."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from html.parser import HTMLParser
from typing import Any
from urllib.parse import urlencode

from starlette.testclient import TestClient

import agui_store
import agui_store.ui
from agui_store.ui import pages, text

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


# --- stores and their pages, through the app's test client ------------------------------


def url(path: str, **params: str) -> str:
    return f"{path}?{urlencode(params)}" if params else path


def get(client: TestClient, path: str, status: int = 200, **params: str) -> Element:
    response = client.get(url(path, **params))
    assert response.status_code == status, response.text[:500]
    return parse(response.text)


def started(thread: str, run: str, **extra: Any) -> dict[str, Any]:
    return {"type": "RUN_STARTED", "threadId": thread, "runId": run, **extra}


def finished(thread: str, run: str) -> dict[str, Any]:
    return {"type": "RUN_FINISHED", "threadId": thread, "runId": run}


def said(message_id: str, words: str, role: str = "assistant") -> list[dict[str, Any]]:
    return [
        {"type": "TEXT_MESSAGE_START", "messageId": message_id, "role": role},
        {"type": "TEXT_MESSAGE_CONTENT", "messageId": message_id, "delta": words},
        {"type": "TEXT_MESSAGE_END", "messageId": message_id},
    ]


def one_run(thread: str, run: str, body: list[dict[str, Any]], **extra: Any) -> list[Any]:
    return [started(thread, run, **extra), *body, finished(thread, run)]


def client_of(store: agui_store.Store, **options: Any) -> TestClient:
    return TestClient(agui_store.ui.app(store, **options))


def shown_messages(page: Element) -> list[tuple[str, str, str]]:
    """(role, id, text) of each message of the conversation, in order."""
    conversation = page.by_id("conversation")
    assert conversation is not None
    out = []
    for block in conversation.find_all("msg"):
        head = block.find("msg-head")
        body = block.find("msg-text")
        assert head is not None
        role = head.find("role")
        ident = head.find("mid")
        assert role is not None and ident is not None
        out.append((role.text, ident.text, body.text if body is not None else ""))
    return out


def as_indented_json(written: str) -> str:
    """A tool result as a run page shows it: JSON indented, its escapes read; other text as
    it came."""
    try:
        return json.dumps(json.loads(written), indent=2, ensure_ascii=False)
    except ValueError:
        return written


def expected_messages(co: agui_store.Checkout) -> list[tuple[str, str, str]]:
    out = []
    for m in co.messages:
        if m.get("role") == "activity":
            body = text.dumps(m.get("content"), indent=2)
        elif m.get("role") == "tool" and isinstance(m.get("content"), str):
            body = text.printable(as_indented_json(m["content"]))
        else:
            body = text.printable(text.content_text(m.get("content")))
        out.append(
            (text.printable(str(m.get("role"))), text.printable(str(m.get("id", ""))),
             text.clipped(body)[0])
        )
    return out[-pages.MESSAGES_SHOWN:]


def assert_run_page_shows_checkout(client: TestClient, store: agui_store.Store,
                                   thread: str, run: str) -> None:
    co = store.checkout(run, thread_id=thread)
    page = get(client, "/run", thread=thread, run=run)
    assert shown_messages(page) == expected_messages(co)
    if len(text.script_json(co.state)) <= text.INLINE_JSON_CHARS:
        assert embedded_json(page, "state-data") == co.state
    events = store.events(run, thread_id=thread)
    rows = page.find_all("event", "tr")
    # Every event is in a row; a message's deltas share one.
    grouped = {(e["type"], e.get("messageId", e.get("toolCallId"))) for e in events
               if e.get("type") in pages.DELTAS}
    deltas = sum(1 for e in events if e.get("type") in pages.DELTAS)
    assert len(rows) == len(events) - deltas + len(grouped)
    assert [r.attrs["data-type"] for r in rows] == [
        text.printable(str(e.get("type"))) for e in events
        if e.get("type") not in pages.DELTAS or e is next(
            x for x in events
            if (x.get("type"), x.get("messageId", x.get("toolCallId")))
            == (e.get("type"), e.get("messageId", e.get("toolCallId"))))
    ]
