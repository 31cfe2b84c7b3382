"""How stored values become page text: safe to encode, bounded in size, JSON for scripts.

What the store reads back may hold lone surrogates (JSON's ``"\\ud83d"``, which JavaScript
producers emit when they split an emoji): no UTF-8 page can carry them, so they are shown
as their JSON escape. Megabyte values are cut to a readable head with a link to the whole.
"""

from __future__ import annotations

import difflib
import json
import re
from typing import Any

from agui_store import records
from agui_store.records import printable as printable  # what the pages show text with

#: Longest text a message or event shows inline; the rest is behind a link.
INLINE_CHARS = 20_000
#: Largest JSON document (state, input) embedded in a page for the tree view.
INLINE_JSON_CHARS = 1_000_000


#: Characters a page shows as their escape (``\x1b``, ``\u202e``), as the command line does
#: (:func:`agui_store.records.on_terminal`): C0 controls but tab, newline and carriage return
#: (which HTML reads as white space), DEL, C1, and the bidirectional embeddings, overrides
#: and isolates, which would reorder the page's own labels around a stored id ("approved
#: \u202edesufer" reads "approved refused").
_HIDDEN = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")
#: A tag, whose attribute values stay as they are: the page's script reads ids from them,
#: and a link or a form sends them back.
_TAG = re.compile(r"(<[^>]*>)")
#: An attribute a browser shows as text (a tooltip), its value escaped for HTML (so it holds
#: no ``"``): its hidden characters are shown as their escapes, as the text's are.
_SHOWN_ATTRIBUTE = re.compile(r'(\stitle=")([^"]*)(")')


def on_page(page: str) -> str:
    """A rendered page with every character of :data:`_HIDDEN` in its text and its titles
    shown as its escape (stored text reaches a page only escaped for HTML, so a ``<`` in it
    is never a tag here)."""
    if _HIDDEN.search(page) is None:  # C speed: the usual page holds none
        return page
    parts = _TAG.split(page)
    parts[::2] = [shown(part) for part in parts[::2]]
    parts[1::2] = [_shown_attributes(tag) for tag in parts[1::2]]
    return "".join(parts)


#: Where a page holds HTML whose text is already as :func:`on_page` shows it (the run tree's
#: rows): a comment, which no stored text can put on a page (it reaches one escaped).
SHOWN_HERE = "<!--shown-->"


def on_page_around(page: str, rows: str) -> str:
    """:func:`on_page` of ``page`` with ``rows`` at its :data:`SHOWN_HERE`: their text and
    titles are already as it shows them (:func:`shown`), and not read again (the rows are
    most of a long tree's page)."""
    head, tail = page.split(SHOWN_HERE, 1)
    return "".join((on_page(head), rows, on_page(tail)))  # a Markup added would escape


def shown(value: str) -> str:
    """A string of a page's text, or a title's value, as :func:`on_page` shows it."""
    return _HIDDEN.sub(_escape, value)


def _shown_attributes(tag: str) -> str:
    if _HIDDEN.search(tag) is None:
        return tag
    return _SHOWN_ATTRIBUTE.sub(
        lambda m: m.group(1) + shown(m.group(2)) + m.group(3), tag
    )


def _escape(match: re.Match[str]) -> str:
    code = ord(match.group())
    return f"\\x{code:02x}" if code <= 0xFF else f"\\u{code:04x}"


def dumps(value: Any, *, indent: int | None = None) -> str:
    """JSON text for people: unicode kept, lone surrogates escaped."""
    return printable(json.dumps(value, ensure_ascii=False, indent=indent))


#: What a JSON document starts with, past white space (``NaN`` and ``Infinity`` too, which
#: ``json.loads`` reads).
_JSON_STARTS = frozenset('{["-0123456789tfnNI')


def json_text(written: Any) -> str:
    """Text a producer sends as JSON (tool-call arguments, a tool result) as a page shows
    it: indented, its strings' escapes read (``\\u00fc`` as ``ü``), when it is JSON; else as
    it came. Its numbers and keys stay as written (``1.10``, ``1e5``, digits past a float's,
    a key given twice): the page shows what the producer sent, not what Python reads."""
    if isinstance(written, str) and written.lstrip()[:1] not in _JSON_STARTS:
        return printable(written)  # plain text: json.loads is slow to say it is not JSON
    try:
        json.loads(written)
    except (TypeError, ValueError, RecursionError):  # not JSON, or nested past reading
        return printable(str(written))
    return printable(_indented(written))


#: A token of a JSON document: a string (its escapes in it), one of ``{}[],:``, or a number
#: or literal (what is left between them, white space aside).
_JSON_TOKEN = re.compile(r'"(?:[^"\\]|\\.)*"|[{}\[\],:]|[^\s{}\[\],:"]+')


def _indented(document: str) -> str:
    """A JSON document laid out as ``json.dumps(indent=2)`` lays out what it reads, from
    its tokens as written (a loop, not a recursion: a deep document is no deeper here)."""
    tokens = _JSON_TOKEN.findall(document)
    out: list[str] = []
    depth = 0
    for i, token in enumerate(tokens):
        if token in ("{", "["):
            if i + 1 < len(tokens) and tokens[i + 1] in ("}", "]"):
                out.append(token)  # empty: "{}", "[]"
            else:
                depth += 1
                out.append(token + "\n" + "  " * depth)
        elif token in ("}", "]"):
            if i and tokens[i - 1] in ("{", "["):
                out.append(token)
            else:
                depth -= 1
                out.append("\n" + "  " * depth + token)
        elif token == ",":
            out.append(",\n" + "  " * depth)
        elif token == ":":
            out.append(": ")
        elif token.startswith('"') and "\\" in token:
            out.append(json.dumps(json.loads(token), ensure_ascii=False))  # escapes read
        else:
            out.append(token)
    return "".join(out)


def script_json(value: Any) -> str:
    """JSON to embed in a ``<script type="application/json">``: ASCII only (so lone
    surrogates stay valid JSON escapes) and no ``<`` that could close the script element."""
    return json.dumps(value, ensure_ascii=True).replace("<", "\\u003c")


def clipped(text: str, limit: int = INLINE_CHARS) -> tuple[str, int]:
    """The head of ``text`` shown inline and how many characters were left out."""
    if len(text) <= limit:
        return text, 0
    return text[:limit], len(text) - limit


def content_text(content: Any) -> str:
    """A message's content as text, its parts one a line
    (:func:`agui_store.records.content_text`)."""
    return records.content_text(content, "\n")


def word_diff(before: str, after: str) -> tuple[list[tuple[str, str]], list[tuple[str, str]]]:
    """Two texts as runs of ``("same" | "gone" | "new", words)``: each side's text with the
    words the other side lacks marked, for highlighting a changed message."""
    a = re.split(r"(\s+)", before)
    b = re.split(r"(\s+)", after)
    left: list[tuple[str, str]] = []
    right: list[tuple[str, str]] = []
    matcher = difflib.SequenceMatcher(a=a, b=b, autojunk=False)
    for op, i1, i2, j1, j2 in matcher.get_opcodes():
        if op == "equal":
            left.append(("same", "".join(a[i1:i2])))
            right.append(("same", "".join(b[j1:j2])))
            continue
        if i2 > i1:
            left.append(("gone", "".join(a[i1:i2])))
        if j2 > j1:
            right.append(("new", "".join(b[j1:j2])))
    return left, right
