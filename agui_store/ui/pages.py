"""What each page shows, read from the store's public API and nothing else.

The messages are ``checkout(...)``'s, the diff is ``diff(...)``'s, the fork is ``fork(...)``'s:
these functions only pick what a page needs and shape it for its template (clipped text,
grouped deltas, lanes). Every call passes the viewer's ``scope``, so another owner's thread
is absent, as the API makes it.
"""

from __future__ import annotations

import functools
import hashlib
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from datetime import datetime
from html import escape
from typing import Any
from urllib.parse import quote

from markupsafe import Markup

from agui_store import (
    EVENT_TYPES,
    LEGACY_EVENT_TYPES,
    Branch,
    Checkout,
    InvalidArgumentError,
    MessageChange,
    Run,
    RunNotFoundError,
    SearchHits,
    Store,
    Thread,
)
from agui_store.engine import conversations
from agui_store.engine import search as search_index
from agui_store.engine.conversations import Continuation
from agui_store.history import search as search_text
from agui_store.history.diff import common_end, common_start
from agui_store.records import RunError, first_words, run_error, short, when
from agui_store.ui import text
from agui_store.ui.lanes import Lanes, Row, svg

#: Runs on one screen of the tree; later ones load a page at a time.
TREE_PAGE = 50
#: Threads on one page of the listing.
THREADS_PAGE = 50
#: Characters of a thread's first words its row shows.
FIRST_WORDS_CHARS = 120
#: Messages a run page shows before "show earlier messages".
MESSAGES_SHOWN = 50
#: Event rows a run page shows before "show all events".
EVENTS_SHOWN = 2_000

#: Lineage reasons the client declared, as against those the store inferred
#: (docs/design/behaviour.md#lineage).
DECLARED = frozenset({"explicit", "parentRunId"})
#: Event types the official client reads: AG-UI 1.0's, and the 0.x reasoning events it
#: converts. Any other is shown as unknown, never dropped.
KNOWN_EVENTS = EVENT_TYPES | LEGACY_EVENT_TYPES
#: Streamed pieces, grouped per message (or tool call) on the run page: type -> id field.
DELTAS = {
    "TEXT_MESSAGE_CONTENT": "messageId",
    "TOOL_CALL_ARGS": "toolCallId",
    "REASONING_MESSAGE_CONTENT": "messageId",
    "THINKING_TEXT_MESSAGE_CONTENT": "messageId",
    "TEXT_MESSAGE_CHUNK": "messageId",
    "TOOL_CALL_CHUNK": "toolCallId",
    "REASONING_MESSAGE_CHUNK": "messageId",
}


def lineage_kind(run: Run) -> str:
    """``declared`` (the client named the parent), ``inferred`` (the store placed the run
    by its messages or as the thread's head) or ``root``."""
    return lineage_kind_of(run.lineage, run.parent_run_id is not None)


def lineage_kind_of(lineage: str, has_parent: bool) -> str:
    """:func:`lineage_kind` of a run of ``lineage``, with a parent or none."""
    if lineage == "root" or not has_parent:
        return "root"
    return "declared" if lineage in DECLARED else "inferred"


# --- threads --------------------------------------------------------------------------------


@dataclass(frozen=True)
class ThreadRow:
    """One line of the threads listing: ``branches`` are the named ones (the default
    aside), ``latest`` the run written to last (``None``: it has none), whose last write
    is the thread's (the listing's order), ``open_runs`` the runs still being recorded,
    ``first_words`` what the conversation is about (``agui-store threads``' first words)."""

    thread_id: str
    owner: str | None
    run_count: int
    branches: list[Branch]
    latest: Run | None
    open_runs: int = 0
    first_words: str = ""

    @property
    def last_activity(self) -> datetime | None:
        """When the thread was last written to."""
        return _written_at(self.latest) if self.latest is not None else None


def _written_at(run: Run) -> datetime:
    return run.updated_at or run.created_at


@dataclass(frozen=True)
class ThreadsPage:
    """A page of threads matching a search.

    Attributes:
        rows: the matching threads of this page, newest first.
        query: the search, as typed.
        next_before: the thread the next page starts after (``None``: this is the last).
        total: how many threads the listing holds, matching or not.
        scanned_to: how far into the listing this page looked.
        continued: the page continues an earlier one (it was given a thread to start after).
        problem: why the page lists nothing it was asked for (``None``: it does).
        next_at: ``next_before``'s last write as this page saw it (milliseconds since the
            epoch), which tells the next page whether that thread moved since.
    """

    rows: list[ThreadRow]
    query: str
    next_before: str | None
    total: int
    scanned_to: int
    continued: bool = False
    problem: str | None = None
    next_at: int | None = None


class _TextMatches:
    """Which threads the store's search finds a query in (a query that is not a search,
    ``"`` alone say, finds nothing).

    The hits of one search of the whole store name the threads that hold the query: a
    query with fewer than :data:`THREADS_FOUND_AT_ONCE` hits answers for every thread of the
    listing with one search. Past them, a thread none of them named is searched alone
    (right when most threads hold the query: the page fills after a few), until those
    searches have cost what the next page of hits costs; that page, twice as long as the
    one before (up to :data:`HITS_READ_AT_ONCE`), is read then. So a word with many hits in
    a few threads costs about one search of its hits, never a search per thread of the
    store, and a word in most threads a few searches.
    """

    def __init__(self, store: Store, query: str, scope: str | None) -> None:
        self.store, self.query, self.scope = store, query, scope
        self.found: set[str] = set()
        self.cursor: str | None = None
        self.limit = THREADS_FOUND_AT_ONCE
        self.complete = False
        self.alone = 0
        try:
            self._read_hits()
        except InvalidArgumentError:
            self.complete = True

    def _read_hits(self) -> None:
        """The next page of the search's hits."""
        hits = self.store.search(self.query, scope=self.scope, limit=self.limit, cursor=self.cursor)
        self.found.update(h.thread_id for h in hits)
        self.cursor = hits.next_cursor
        self.complete = hits.next_cursor is None
        self.limit = min(2 * self.limit, HITS_READ_AT_ONCE)
        self.alone = 0

    def __contains__(self, thread_id: str) -> bool:
        while thread_id not in self.found and not self.complete:
            if self.alone * HITS_PER_SEARCH < self.limit:
                self.alone += 1
                try:
                    return bool(
                        self.store.search(
                            self.query, thread_id=thread_id, scope=self.scope, limit=1
                        )
                    )
                except RunNotFoundError:  # erased since the listing was read
                    return False
            self._read_hits()
        return thread_id in self.found


#: The hits the first search reads for a threads listing with a query (see
#: :class:`_TextMatches`).
THREADS_FOUND_AT_ONCE = 50
#: The most hits a later page reads: the most a search returns at once.
HITS_READ_AT_ONCE = 1_000
#: What a search of one thread costs, in hits of a search of the store read: about ten.
HITS_PER_SEARCH = 10


#: Message hits a search page shows at a time.
HITS_PAGE = 20


@dataclass(frozen=True)
class SearchPage:
    """The messages a search finds, newest first (``Store.search``), a page at a time.

    Attributes:
        hits: this page's hits.
        problem: why the query is not a search (``None``: it is).
        continued: the page continues an earlier one (it was given a cursor).
    """

    hits: SearchHits
    problem: str | None = None
    continued: bool = False


def search_page(
    store: Store, query: str, *, cursor: str | None = None, scope: str | None = None
) -> SearchPage | None:
    """The hits of ``query`` from ``cursor`` on (``None`` for no query)."""
    if not query.strip():
        return None
    if cursor is not None:
        try:
            search_index.parse_cursor(cursor)
        except InvalidArgumentError:
            # A page link this viewer made carries a cursor the store gave: say so in the
            # page's words, not the API's.
            return SearchPage(SearchHits(), "the link's page cursor is not one this viewer made")
    try:
        hits = store.search(query, scope=scope, limit=HITS_PAGE, cursor=cursor)
    except InvalidArgumentError as e:
        return SearchPage(SearchHits(), str(e))
    return SearchPage(hits, continued=cursor is not None)


def threads_page(
    store: Store,
    *,
    query: str = "",
    before: str | None = None,
    at: int | None = None,
    scope: str | None = None,
) -> ThreadsPage:
    """Threads, the one written to last first, those whose id holds ``query`` (any case) or
    in which the store's search finds it, a page at a time: the threads listed after
    ``before``, last written at ``at`` (:attr:`ThreadsPage.next_at`), so that a write
    elsewhere, which moves its thread to the top, neither repeats a thread nor skips one
    that stayed below on the next page; a thread written since is at the top of the first."""
    ids = store.threads(scope=scope, recent_first=True)
    total = len(ids)
    folded = query.strip().casefold()
    query = query.strip()
    rows: list[ThreadRow] = []
    skipped = 0  # the threads listed before this page
    if before is not None:
        try:
            ids = store.threads(
                scope=scope, recent_first=True, after=before, after_updated_at=when(at)
            )
        except RunNotFoundError:
            problem = "the thread this page continues from is no longer in the store"
            return ThreadsPage([], query, None, total, 0, True, problem)
        skipped = max(0, total - len(ids))
    position = 0
    matches = _TextMatches(store, query, scope) if folded else None
    facts: Thread | None = None  # the last thread read, whose write the next link may hold
    while position < len(ids) and len(rows) < THREADS_PAGE:
        thread_id = ids[position]
        position += 1
        if (
            matches is not None
            and folded not in thread_id.casefold()
            and thread_id not in matches
        ):
            continue
        facts = store.thread(thread_id, scope=scope)
        if facts is None:  # deleted between the listing and now
            continue
        # The thread's last write may be to any of its runs (an open one started long
        # ago, say): the listing's order is by it, and the thread's record names that run.
        latest = (
            None if facts.latest_run_id is None
            else store.get_run(facts.latest_run_id, thread_id=thread_id, scope=scope)
        )
        try:
            branches = [b for b in store.branches(thread_id, scope=scope) if not b.default]
            words = _first_words(store, thread_id, scope)
        except RunNotFoundError:  # deleted between the listing and now
            continue
        rows.append(
            ThreadRow(
                thread_id, facts.owner, facts.run_count, branches, latest, facts.open_runs,
                words,
            )
        )
    more = ids[position - 1] if position < len(ids) else None
    if more is not None and (facts is None or facts.thread_id != more):
        facts = store.thread(more, scope=scope)
    return ThreadsPage(
        rows, query, more, total, skipped + position, before is not None,
        next_at=None if more is None else _write_ms(facts),
    )


def _first_words(store: Store, thread_id: str, scope: str | None) -> str:
    """A thread's first words as ``agui-store threads`` shows them: the first user message
    of its newest run's view, restored from that run's checkpoint (no event is read), cut
    to what a row shows."""
    newest = store.runs(thread_id, limit=1, scope=scope)
    if not newest:
        return ""
    messages = store.checkout(newest[-1].run_id, thread_id=thread_id, scope=scope).messages
    return text.printable(short(first_words(messages), FIRST_WORDS_CHARS))


def _write_ms(facts: Thread | None) -> int | None:
    """When a thread was last written, in milliseconds since the epoch (``None``: never,
    or the thread is gone)."""
    if facts is None or facts.updated_at is None:
        return None
    return round(facts.updated_at.timestamp() * 1000)


# --- the run tree ---------------------------------------------------------------------------


@functools.lru_cache(maxsize=256)
def _lineage_cell(lineage: str, has_parent: bool) -> str:
    """The lineage cell's HTML: its kind, its label and what it means (few lineages recur:
    each is formatted once)."""
    kind = lineage_kind_of(lineage, has_parent)
    if kind == "inferred":
        label, meaning = f"{kind}: {lineage}", f"the store placed this run by {lineage}"
    elif kind == "declared":
        label, meaning = f"{kind}: {lineage}", f"the client declared its parent ({lineage})"
    else:
        label, meaning = kind, "no parent"
    return (
        f'<span class="lineage l-{kind}" title="{_shown(meaning)}">{_shown(label)}</span>'
    )


@functools.lru_cache(maxsize=256)
def _status_cell(status: str) -> str:
    """The status cell's HTML (formatted once per status)."""
    label = "open (recording)" if status == "incomplete" else _shown(status)
    return f'<span class="status s-{escape(status)}">{label}</span>'


def _shown(value: str) -> str:
    """A stored string as the page's text (or a title) shows it: escaped for HTML, its
    hidden characters as their escapes (:func:`text.on_page`)."""
    return text.shown(escape(text.printable(value)))


def tree_rows_html(rows: Sequence[Row], root: str, thread_id: str) -> Markup:
    """The rows of a page of the tree as HTML, their links under ``root`` (where the viewer is
    mounted), their text and titles already as :func:`text.on_page` shows a page's.

    Formatted here rather than in the template: the first screen of a long thread must cost
    about what reading its runs costs, and Jinja's escaping of each of a row's dozen values
    took four times the read. Every stored string goes through ``html.escape``; the page's
    check for hidden characters then skips the rows (``text.on_page_around``).
    """
    width = max((row.width for row in rows), default=1)
    thread = quote(thread_id, safe="")
    base = escape(root)
    quoted: dict[str, str] = {}  # a run's id is quoted again as its child's parent

    def q(run_id: str) -> str:
        if run_id not in quoted:
            quoted[run_id] = quote(run_id, safe="")
        return quoted[run_id]

    out = []
    for row in rows:
        run = row.run
        run_q = q(run.run_id)
        run_id = escape(text.printable(run.run_id))
        refs = "".join(
            f' <span class="ref{" head" if i == 0 and name == "main" else ""}" '
            f'title="branch {_shown(name)} points here">{_shown(name)}</span>'
            for i, name in enumerate(run.branches)
        ) if run.branches else ""
        joining = len(row.joining)
        if joining > 1:
            refs += (
                f' <span class="fork-point" title="{joining} lines continue from this run">'
                f"fork point · {joining}</span>"
            )
        hash_label = run.short_hash or ""
        if hash_label and run.status == "incomplete":
            hash_label += "+"
        diff = ""
        if run.parent_run_id is not None:
            diff = (
                f'<a href="{base}/diff?thread={thread}&amp;a={q(run.parent_run_id)}'
                f'&amp;b={run_q}&amp;mode=two-dot" title="what this run changed">diff</a> · '
            )
        link = f"{base}/{{}}?thread={thread}&amp;run={run_q}"
        out.append(
            f'<tr class="run-row" data-run="{run_id}" data-status="{escape(run.status)}">'
            f'<td class="pick"><input type="checkbox" class="pick-run" value="{run_id}" '
            f'aria-label="select {run_id} to compare"></td>'
            f'<td class="graph-cell">{svg(row, width)}</td>'
            f'<td class="run-id"><a href="{link.format("run")}">'
            f"<code>{_shown(_short(run.run_id, 40))}</code></a>{refs}</td>"
            f"<td>{_status_cell(run.status)}</td>"
            f"<td>{_lineage_cell(run.lineage, run.parent_run_id is not None)}</td>"
            f'<td class="num">{run.event_count}</td>'
            f'<td class="time">{run.created_at.isoformat(" ", "seconds")[:19]}</td>'
            f'<td><code class="hash">{hash_label}</code></td>'
            f'<td class="actions">{diff}<a href="{link.format("fork")}">fork from here</a></td>'
            "</tr>\n"
        )
    return Markup("".join(out))


def _short(value: str, width: int) -> str:
    return value if len(value) <= width else value[: width - 1] + "…"


@dataclass(frozen=True)
class TreePage:
    """One screen of a thread's run tree.

    Attributes:
        rows: the runs' rows, newest first, with the lanes each draws.
        next_before: the run the next (older) page starts below (``None``: this is the last).
        next_columns: the lanes the next page continues (see :class:`Lanes`).
        token: what the live view polls for a change (the first page's only; else ``""``).
    """

    thread_id: str
    branches: list[Branch]
    rows: list[Row]
    next_before: str | None
    next_columns: list[str | None]
    token: str


def thread_token(branches: Sequence[Branch], newest: Sequence[Run]) -> str:
    """What changes whenever the thread does, for the live view to poll: where each branch
    points, and the newest runs with their event counts and statuses (a new run, or a run
    being recorded, is among them)."""
    parts = [f"{b.name}={b.run_id}" for b in branches]
    parts += [f"{r.run_id}:{r.event_count}:{r.status}" for r in newest]
    return hashlib.sha1("\n".join(parts).encode("utf-8", "surrogatepass")).hexdigest()


def run_token(run: Run) -> str:
    """What changes whenever the run does (it records events, or ends), for its live page to
    poll."""
    return f"{run.event_count}:{run.status}:{run.last_seq}"


def poll_token(store: Store, thread_id: str, scope: str | None) -> str:
    """The thread's :func:`thread_token` now (``RunNotFoundError`` when it is gone, or not
    the scope's)."""
    newest = store.runs(thread_id, limit=TREE_PAGE, scope=scope)
    return thread_token(store.branches(thread_id, scope=scope), newest)


def tree_page(
    store: Store,
    thread_id: str,
    *,
    before: str | None = None,
    columns: Sequence[str | None] = (),
    scope: str | None = None,
) -> TreePage:
    """A page of the run tree, newest first, continuing the lanes of the page before.

    It reads the page's runs and the branches, nothing else: the first screen of a long
    thread costs about what ``log(limit=50)`` costs (``benchmarks/bench_ui.py``)."""
    # One run past the page tells whether an older page follows: a thread of exactly a
    # page of runs offers none that would load nothing.
    recorded = store.runs(thread_id, limit=TREE_PAGE + 1, before=before, scope=scope)
    older = len(recorded) > TREE_PAGE
    recorded = recorded[-TREE_PAGE:]
    runs = recorded[::-1]
    lanes = Lanes(list(columns))
    rows = lanes.layout(runs)
    more = runs[-1].run_id if older else None
    branches = store.branches(thread_id, scope=scope)
    # The live view's token, from what the first page read (later pages never poll).
    token = thread_token(branches, recorded) if before is None else ""
    return TreePage(thread_id, branches, rows, more, lanes.columns, token)


# --- a run ----------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class CallView:
    """A tool call of an assistant message: its arguments (indented when they are JSON) cut
    to what shows inline, ``left_out`` the characters cut after them, ``skipped`` those
    before them (arguments longer than a page shows, shown from where a search finds a
    word in them)."""

    id: str
    name: str
    arguments: str
    left_out: int
    skipped: int = 0


@dataclass(frozen=True, slots=True)
class MessageView:
    """One message as a page shows it: ``index`` is its position in the view, ``text`` its
    content as text cut to what shows inline (``left_out``: the characters cut after it,
    ``skipped``: those before it), ``extra`` its other fields as JSON (``""``: none)."""

    index: int
    role: str
    id: str
    text: str
    left_out: int
    calls: Sequence[CallView]
    tool_call_id: str | None
    extra: str  # other fields (name, activityType, encryptedValue...) as JSON, or ""
    skipped: int = 0

    @property
    def cut(self) -> bool:
        """Whether the page shows only part of the message (its text or a call's
        arguments): it then links to the whole."""
        return bool(
            self.left_out or self.skipped or any(c.left_out or c.skipped for c in self.calls)
        )


_SHOWN_FIELDS = {"id", "role", "content", "toolCalls", "toolCallId"}


def message_text(message: dict[str, Any]) -> str:
    """A message's content as a page shows it: its text, an activity's content as JSON, a
    tool result that is JSON indented with its escapes read, as tool-call arguments are."""
    role = message.get("role")
    if role == "activity":
        return text.dumps(message.get("content"), indent=2)
    content = message.get("content")
    if role == "tool" and isinstance(content, str):
        return text.json_text(content)
    return text.printable(text.content_text(content))


def message_view(
    index: int,
    message: dict[str, Any],
    *,
    start: int = 0,
    end: int | None = None,
    query: search_text.Query | None = None,
) -> MessageView:
    """A message's text clipped (from character ``start``, before ``end`` when given), its
    tool calls with their arguments pretty-printed, each shown from a little before where
    the search ``query`` finds a word in them when they are longer than a page shows and
    their start does not show it."""
    whole = message_text(message)
    body, _ = text.clipped(whole[start:end])
    left_out = len(whole) - start - len(body)
    calls = []
    for call in message.get("toolCalls") or []:
        if not isinstance(call, dict):
            continue
        found = call.get("function")
        function: dict[str, Any] = found if isinstance(found, dict) else {}
        shown = text.json_text(function.get("arguments", ""))
        skipped = 0 if query is None else _from_match(shown, query, as_json=True)
        head, cut = text.clipped(shown[skipped:])
        calls.append(
            CallView(str(call.get("id", "")), str(function.get("name", "")), head, cut, skipped)
        )
    extra = {k: v for k, v in message.items() if k not in _SHOWN_FIELDS}
    extra_text = text.clipped(text.dumps(extra))[0] if extra else ""
    tool_call_id = message.get("toolCallId")
    return MessageView(
        index,
        text.printable(str(message.get("role", "?"))),
        text.printable(str(message.get("id", ""))),
        body,
        left_out,
        tuple(calls),  # most messages call no tool: the one empty tuple, not a list each
        None if tool_call_id is None else text.printable(str(tool_call_id)),
        extra_text,
        start,
    )


def as_templates_escape(value: str) -> str:
    """``value`` escaped for HTML as the templates escape it (``markupsafe.escape``: ``"``
    as ``&#34;``, ``'`` as ``&#39;``), a third of its cost on a short string: the HTML built
    here is then byte for byte what a template would give."""
    return (
        value.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
        .replace('"', "&#34;").replace("'", "&#39;")
    )


#: Builds a link of the viewer under the root it is mounted at: ``link("/run", thread=t, run=r)``
#: (a parameter given ``None`` is left out).
Link = Callable[..., str]


def message_html(
    link: Link,
    m: MessageView,
    thread_id: str,
    run_id: str | None,
    words: Sequence[tuple[str, str]] | None = None,
    badge: str | None = None,
    anchor: bool = False,
    found: str = "",
) -> Markup:
    """A message's block on a run, diff or changes page: its head (``badge``, role, id, the
    tool call it answers), its text (``words``: with the changed words marked, as
    :func:`text.word_diff` gives them), its tool calls' arguments, its other fields, and a
    link to the whole message in ``run_id`` where the page shows part of it (``found``: the
    search it is shown from; ``anchor``: the block is the target of ``#msg-<index>``).

    Formatted here rather than in a template macro: a diff page draws a block for each
    message it compares, and a Jinja macro called for each was a third of the page's
    rendering. Every value is escaped as the templates escape it
    (:func:`as_templates_escape`): the HTML is byte for byte what the macro gave
    (``tests/data/reference_message_blocks.html``).
    """
    # The white space is the macro's: a line of it that ended in a block tag ({% endif %})
    # lost its newline, and one that began with one its indent.
    e = as_templates_escape
    index = m.index
    whole = start = whole_link = ""  # the links of a message the page cuts
    if m.cut:
        whole = e(link("/run/message", thread=thread_id, run=run_id, index=index))
        whole_link = f' · <a href="{whole}">the whole message (JSON)</a>' if run_id else ""
        start = f'{e(link("/run", thread=thread_id, run=run_id, all_messages=1))}#msg-{index}'
    out = [
        f'<div class="msg role-{e(m.role)}" data-index="{index}"',
        f' id="msg-{index}">\n' if anchor else ">\n",
        '  <div class="msg-head">',
        f'<span class="kind">{e(badge)}</span> ' if badge else "",
        f'<span class="role">{e(m.role)}</span> <code class="mid">{e(m.id)}</code>',
        f' <span class="muted">result of</span> <code>{e(m.tool_call_id)}</code>'
        if m.tool_call_id else "",
        "</div>\n",
    ]
    if m.skipped and found:
        out.append(
            f'<div class="clipped">… {m.skipped:,} earlier characters not shown: the message '
            f'is shown from a little before “{e(found)}” · <a href="{start}">from its start</a>'
            f' · <a href="{whole}">the whole message (JSON)</a></div>\n'
        )
    elif m.skipped:
        out.append(
            f'<div class="clipped">… {m.skipped:,} earlier characters, unchanged, not shown'
            f"{whole_link}</div>"
        )
    if words:
        marked = {"same": "{}", "gone": "<del>{}</del>"}
        out.append('  <div class="msg-text">')
        out += [marked.get(kind, "<ins>{}</ins>").format(e(piece)) for kind, piece in words]
        out.append("</div>\n")
    elif m.text:
        out.append(f'  <div class="msg-text">{e(m.text)}</div>\n')
    if m.left_out:
        out.append(
            f'<div class="clipped">… {m.left_out:,} more characters not shown{whole_link}</div>'
        )
    for c in m.calls:
        out.append(
            f'  <div class="call"><span class="call-name">→ {e(c.name)}</span> '
            f'<code class="muted">{e(c.id)}</code>'
        )
        if c.skipped and found:
            out.append(
                f'<div class="clipped">… {c.skipped:,} earlier characters of arguments not '
                f"shown: they are shown from a little before “{e(found)}” · "
                f'<a href="{start}">from their start</a> · '
                f'<a href="{whole}">the whole message (JSON)</a></div>'
            )
        out.append(f'<pre class="args">{e(c.arguments)}</pre>')
        if c.left_out:
            out.append(
                f'<div class="clipped">… {c.left_out:,} more characters of arguments'
                f"{whole_link}</div>"
            )
        out.append("</div>\n")
    if m.extra:
        out.append(f'<div class="extra"><code>{e(m.extra)}</code></div>')
    out.append("</div>\n")
    return Markup("".join(out))


def conversation_html(
    link: Link, messages: Sequence[MessageView], thread_id: str, run_id: str, found: str
) -> Markup:
    """A run page's messages: the block of each (:func:`message_html`), the target of its
    ``#msg-<index>``, drawn in one call rather than one template call a message."""
    return Markup("".join([
        message_html(link, m, thread_id, run_id, anchor=True, found=found) for m in messages
    ]))


def changes_html(link: Link, changes: Sequence[ChangeView], thread_id: str) -> Markup:
    """A side of the diff page: a block for each message change, the message as it was and
    as it is now side by side when it was modified, else the message added or removed,
    each side linking to its run where the page cuts it (:func:`message_html`)."""
    e = as_templates_escape
    out = []
    for v in changes:
        out.append(f'  <div class="change k-{e(v.kind)}" data-id="{e(v.id)}">\n')
        if v.kind == "modified":
            assert v.before is not None and v.after is not None
            was = message_html(link, v.before, thread_id, v.before_run, v.before_words, "was")
            now = message_html(link, v.after, thread_id, v.after_run, v.after_words, "now")
            out.append(
                f'    <div class="before-after">\n      <div class="was">{was}</div>\n'
                f'      <div class="now">{now}</div>\n    </div>\n'
            )
        elif v.after:
            out.append(message_html(link, v.after, thread_id, v.after_run, None, v.kind))
        else:
            assert v.before is not None
            out.append(message_html(link, v.before, thread_id, v.before_run, None, v.kind))
        out.append("  </div>\n")
    return Markup("".join(out))


@dataclass(frozen=True)
class EventRow:
    """One row of the event list: an event, or a message's streamed deltas together.

    Attributes:
        index: the (first) event's position in the run.
        known: whether the type is one of :data:`KNOWN_EVENTS` (others show as unknown).
        summary: the id or name that tells the row apart (``messageId=m1``).
        json: the (first) event as JSON, cut to what shows; ``left_out``: the characters cut.
        count: the deltas in the group (1: a single event).
        joined: the group's deltas concatenated, cut; ``joined_left_out``: the characters cut.
    """

    index: int
    type: str
    known: bool
    summary: str
    json: str
    left_out: int
    count: int = 1  # deltas in a group
    joined: str = ""  # a group's deltas, concatenated
    joined_left_out: int = 0


def _event_summary(event: dict[str, Any]) -> str:
    for key in ("messageId", "toolCallId", "stepName", "toolCallName", "role", "name"):
        if key in event:
            return f"{key}={event[key]}"
    return ""


def event_rows(events: Sequence[dict[str, Any]]) -> list[EventRow]:
    """The events in order, a message's (or tool call's) streamed deltas in one row, at the
    place of its first delta."""
    rows: list[EventRow | None] = []
    groups: dict[tuple[str, str], tuple[int, list[int]]] = {}
    for index, event in enumerate(events):
        kind = str(event.get("type", "?"))
        key_field = DELTAS.get(kind)
        if key_field is not None and isinstance(event.get(key_field), str):
            key = (kind, event[key_field])
            if key in groups:
                groups[key][1].append(index)
                continue
            groups[key] = (len(rows), [index])
            rows.append(None)  # filled once the group is whole
            continue
        shown, cut = text.clipped(text.dumps(event), 2_000)
        rows.append(
            EventRow(
                index,
                text.printable(kind),
                kind in KNOWN_EVENTS,
                text.printable(_event_summary(event)),
                shown,
                cut,
            )
        )
    for (kind, ident), (place, indexes) in groups.items():
        pieces = [events[i].get("delta") for i in indexes]
        joined = "".join(p for p in pieces if isinstance(p, str))
        shown_joined, joined_cut = text.clipped(text.printable(joined), 4_000)
        first = events[indexes[0]]
        shown, cut = text.clipped(text.dumps(first), 2_000)
        id_field = DELTAS[kind]
        rows[place] = EventRow(
            indexes[0],
            kind,
            True,
            text.printable(f"{id_field}={ident}"),
            shown,
            cut,
            len(indexes),
            shown_joined,
            joined_cut,
        )
    return [row for row in rows if row is not None]


def words_html(name: str) -> str:
    """A name like ``TEXT_MESSAGE_CONTENT`` or ``messageId=m1``, escaped as the templates
    escape it, that a line may break after each of its underscores and its ``=``, rather
    than inside a word (escaping writes neither)."""
    return as_templates_escape(name).replace("_", "_<wbr>").replace("=", "=<wbr>")


def event_rows_html(link: Link, rows: Sequence[EventRow], thread_id: str, run_id: str) -> Markup:
    """The rows of a run page's event list: each row's type (marked when it is not an AG-UI
    one), what tells it apart, a group's deltas joined, the event as JSON, and a link to the
    whole event where the row cuts it.

    Formatted here, as :func:`message_html` is, rather than in a template loop: the list
    holds up to :data:`EVENTS_SHOWN` rows. Every value is escaped as the templates escape
    it: the HTML is byte for byte what the loop gave
    (``tests/data/reference_event_rows.html``).
    """
    # The white space is the loop's: a line of it that ended in a block tag lost its
    # newline, and one that began with one its indent.
    e = as_templates_escape
    out = []
    for row in rows:
        out.append(
            f'<tr class="event{"" if row.known else " unknown"}" data-type="{e(row.type)}"'
            f' data-index="{row.index}">\n  <td class="num">{row.index}</td>\n'
            f'  <td><span class="etype">{words_html(row.type)}</span>'
        )
        if not row.known:
            out.append(
                ' <span class="badge-unknown" title="not an AG-UI 1.0 event type">'
                "unknown type</span>"
            )
        out.append(f'</td>\n  <td><span class="about">{words_html(row.summary)}</span>')
        if row.count > 1:
            out.append(f" · <b>{row.count} deltas</b>")
        out.append('</td>\n  <td class="payload">\n')
        if row.count > 1 or row.joined:
            out.append(f'<div class="joined">{e(row.joined)}')
            if row.joined_left_out:
                out.append(
                    f'<span class="clipped"> … {row.joined_left_out:,} more characters</span>'
                )
            out.append(
                "</div>\n    <details><summary>first delta as recorded</summary>"
                f"<pre>{e(row.json)}</pre></details>\n"
            )
        else:
            out.append(f"<pre>{e(row.json)}</pre>")
        if row.left_out:
            whole = e(link("/run/event", thread=thread_id, run=run_id, index=row.index))
            out.append(
                f'<div class="clipped">… {row.left_out:,} more characters · '
                f'<a href="{whole}">the whole event (JSON)</a></div>'
            )
        out.append("  </td>\n</tr>\n")
    return Markup("".join(out))


@dataclass(frozen=True)
class RunPage:
    """Everything a run page shows when it opens (the state change and the input load
    after it, as they can be large).

    Attributes:
        messages: the view's messages shown; ``earlier``: how many come before them, hidden.
        events: the event rows shown; ``events_left_out``: the rows after them, hidden.
        event_types: every event type of the run, for the filter.
        state_json: the state as JSON for the page's script, ``None`` when it is too long to
            inline (``state_chars`` long).
        interrupts: the pending interrupts as JSON (``""``: none).
        error: the ``RUN_ERROR`` a failed run ended with (``None``: it did not fail).
        continued: for a run that saved pydantic-ai conversation entries, which entry the
            model continued from (the page says so when it is not where the AG-UI lineage
            reached: the conversation was branched on the server).
        all_messages: the page was asked for every message; ``all_events``: for every event.
        found: the search the page was opened from (``""``: none): a message longer than a
            page shows is shown from a little before where the search finds it.
    """

    run: Run
    parent: Run | None
    checkout: Checkout
    messages: list[MessageView]
    earlier: int
    events: list[EventRow]
    event_types: list[str]
    events_left_out: int
    state_json: str | None
    state_chars: int
    interrupts: str
    error: RunError | None = None
    continued: Continuation | None = None
    all_messages: bool = False
    all_events: bool = False
    found: str = ""

    @property
    def view(self) -> dict[str, int | str]:
        """The query parameters that ask for this view again: a link from the page, and its
        live updates, keep what "show all" chose and the search it was opened from."""
        chosen = {"all_messages": self.all_messages, "all_events": self.all_events}
        view: dict[str, int | str] = {name: 1 for name, on in chosen.items() if on}
        return {**view, "q": self.found} if self.found else view

    @property
    def token(self) -> str:
        """The run's :func:`run_token` as the page shows it."""
        return run_token(self.run)


def run_page(
    store: Store,
    thread_id: str,
    run_id: str,
    *,
    all_messages: bool = False,
    all_events: bool = False,
    found: str = "",
    scope: str | None = None,
) -> RunPage:
    """A run: the conversation as ``checkout`` restores it, its state, its events; a message
    longer than a page shows, from a little before where the search ``found`` finds it."""
    co = store.checkout(run_id, thread_id=thread_id, scope=scope)
    run = co.run
    parent = (
        store.get_run(run.parent_run_id, thread_id=thread_id, scope=scope)
        if run.parent_run_id is not None
        else None
    )
    shown_from = 0 if all_messages else max(0, len(co.messages) - MESSAGES_SHOWN)
    query = _query(found)
    messages = [
        _found_in(i, co.messages[i], query) for i in range(shown_from, len(co.messages))
    ]
    events = store.events(run.run_id, thread_id=thread_id, scope=scope)
    rows = event_rows(events)
    types = sorted({row.type for row in rows})
    left_out = 0
    if not all_events and len(rows) > EVENTS_SHOWN:
        left_out = len(rows) - EVENTS_SHOWN
        rows = rows[:EVENTS_SHOWN]
    state = text.script_json(co.state)
    continued = None
    if any(e.get("type") == "CUSTOM" and e.get("name") == conversations.SAVED_EVENT
           for e in events):
        lineage = [r.run_id for r in store.log(run.run_id, thread_id=thread_id, scope=scope)]
        with store.reading() as tx:
            continued = conversations.continuation(tx, thread_id, lineage)
    return RunPage(
        run,
        parent,
        co,
        messages,
        shown_from,
        rows,
        types,
        left_out,
        state if len(state) <= text.INLINE_JSON_CHARS else None,
        len(state),
        text.dumps(co.interrupts, indent=2) if co.interrupts else "",
        run_error(run, events),
        continued,
        all_messages,
        all_events,
        found if query is not None else "",
    )


def _query(found: str) -> search_text.Query | None:
    """The search a run page was opened from, parsed (``None``: none, or not a search)."""
    if not found.strip():
        return None
    try:
        return search_text.parse(found)
    except InvalidArgumentError:
        return None


def _found_in(index: int, message: dict[str, Any], query: search_text.Query | None) -> MessageView:
    """A message as a run page shows it: from its start, or, when its text (or a tool
    call's arguments) is longer than a page shows and ``query`` finds a word past what its
    start shows, from a little before it."""
    if query is None:
        return message_view(index, message)
    # A tool result is found by its JSON's strings as read, as tool-call arguments are.
    as_json = message.get("role") == "tool"
    start = _from_match(message_text(message), query, as_json=as_json)
    return message_view(index, message, start=start, query=query)


def _from_match(whole: str, query: search_text.Query, *, as_json: bool) -> int:
    """Where a text a page shows is shown from: 0, or, when it is longer than a page shows
    and ``query`` finds a word past what its start shows, a little before that word (in a
    JSON document, ``as_json``, a word its strings' escapes write is found, as the search
    finds it)."""
    if len(whole) <= text.INLINE_CHARS:
        return 0
    first = search_text.first_match_as_written if as_json else search_text.first_match
    at = first(whole, query)
    if at is None or at + CHANGE_CONTEXT <= text.INLINE_CHARS:
        return 0
    return _shown_from(whole, at)


@dataclass(frozen=True)
class StateChange:
    """What a run changed: the state before and after it, the JSON Patch between them and
    the messages it added, removed or changed (``diff(parent, run, mode="two-dot")``)."""

    run: Run
    parent: Run | None
    before_json: str | None
    after_json: str | None
    patch: str
    changes: list[MessageChange]


def state_change(
    store: Store, thread_id: str, run_id: str, *, scope: str | None = None
) -> StateChange:
    """The run's change from its lineage parent, as ``diff`` computes it."""
    after = store.checkout(run_id, thread_id=thread_id, scope=scope)
    run = after.run

    def embedded(value: Any) -> str | None:
        out = text.script_json(value)
        return out if len(out) <= text.INLINE_JSON_CHARS else None

    if run.parent_run_id is None:
        return StateChange(run, None, None, embedded(after.state), "", [])
    d = store.diff(run.parent_run_id, run.run_id, thread_id=thread_id, mode="two-dot", scope=scope)
    before = store.checkout(run.parent_run_id, thread_id=thread_id, scope=scope)
    return StateChange(
        run,
        d.a,
        embedded(before.state),
        embedded(after.state),
        text.dumps(d.state_patch, indent=2) if d.state_patch else "",
        d.messages,
    )


# --- diff -----------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class ChangeView:
    """One message change with what a page draws of it: ``before_words`` and
    ``after_words`` mark the changed words (``("same" | "gone" | "new", words)``), empty when
    the texts are not compared (one side missing, or too long). ``before_run`` and
    ``after_run`` are the runs whose views hold each side, which a side cut on the page
    links to (``None``: no link)."""

    kind: str
    id: str
    before: MessageView | None
    after: MessageView | None
    before_words: Sequence[tuple[str, str]] = ()
    after_words: Sequence[tuple[str, str]] = ()
    before_run: str | None = None
    after_run: str | None = None


#: Longest texts whose changed words are highlighted (longer ones are shown side by side).
HIGHLIGHT_CHARS = 20_000
#: Unchanged characters a long changed message shows around where its two sides differ.
CHANGE_CONTEXT = 400


def _window(before: str, after: str) -> tuple[int, int, int, bool]:
    """Where two long versions of a message are shown: from the same character on both
    sides (a little before their first difference, at a word), to where each side's
    difference ends plus a little. Also whether both windows reach that far (else the
    shown texts do not end alike and are not compared word by word)."""
    prefix = common_start(before, after)  # slices of text compare as lists' do
    suffix = common_end(before, after, min(len(before), len(after)) - prefix)
    start = _shown_from(before, prefix)
    ends = [min(len(t), len(t) - suffix + CHANGE_CONTEXT) for t in (before, after)]
    whole = all(e - start <= text.INLINE_CHARS for e in ends)
    return start, ends[0], ends[1], whole


def _shown_from(whole: str, at: int) -> int:
    """Where a long text is shown from so that its character ``at`` is in view: a little
    before it, at a word."""
    start = max(0, at - CHANGE_CONTEXT)
    if start:
        space = re.compile(r"\s").search(whole, start, at)
        start = space.end() if space else start
    return start


def change_view(
    change: MessageChange, *, before_run: str | None = None, after_run: str | None = None
) -> ChangeView:
    """A message change, with the changed words marked when both sides have text. A side
    longer than a page shows is shown from a little before where the two sides differ, so
    the difference is in view."""
    if change.before is None or change.after is None:
        before = message_view(0, change.before) if change.before is not None else None
        after = message_view(0, change.after) if change.after is not None else None
        return ChangeView(
            change.kind, text.printable(str(change.id)), before, after,
            before_run=before_run, after_run=after_run,
        )
    old, new = message_text(change.before), message_text(change.after)
    words: tuple[Sequence[tuple[str, str]], Sequence[tuple[str, str]]] = ((), ())
    if old != new and max(len(old), len(new)) > text.INLINE_CHARS:
        start, old_end, new_end, whole = _window(old, new)
        before = message_view(0, change.before, start=start, end=old_end)
        after = message_view(0, change.after, start=start, end=new_end)
        compared = whole
    else:
        before, after = message_view(0, change.before), message_view(0, change.after)
        compared = old != new and not before.left_out and not after.left_out
    if compared and len(before.text) + len(after.text) <= HIGHLIGHT_CHARS:
        words = text.word_diff(before.text, after.text)
    return ChangeView(
        change.kind, text.printable(str(change.id)), before, after, *words,
        before_run=before_run, after_run=after_run,
    )


class _Positions:
    """Where messages sit in the views of a thread's runs, each view restored once, and
    only for a message the page cuts (the link to the whole one names its position)."""

    def __init__(self, store: Store, thread_id: str, scope: str | None) -> None:
        self.store, self.thread_id, self.scope = store, thread_id, scope
        self.views: dict[str, list[dict[str, Any]]] = {}

    def of(self, run_id: str, message: dict[str, Any]) -> int | None:
        if run_id not in self.views:
            self.views[run_id] = self.store.checkout(
                run_id, thread_id=self.thread_id, scope=self.scope
            ).messages
        same_id = message.get("id")
        for position, candidate in enumerate(self.views[run_id]):
            if candidate.get("id") == same_id and candidate == message:
                return position
        return None


def change_views(
    store: Store,
    thread_id: str,
    changes: Sequence[MessageChange],
    *,
    before_run: str | None,
    after_run: str | None,
    scope: str | None = None,
) -> list[ChangeView]:
    """The changes from the view of ``before_run`` to that of ``after_run`` as a page draws
    them, a side cut on the page linking to its whole message in its run."""
    positions = _Positions(store, thread_id, scope)
    out = []
    for change in changes:
        view = change_view(change)
        links: dict[str, Any] = {}
        for side, run_id, message in (
            ("before", before_run, change.before),
            ("after", after_run, change.after),
        ):
            shown: MessageView | None = getattr(view, side)
            if shown is None or message is None or run_id is None or not shown.cut:
                continue
            position = positions.of(run_id, message)
            if position is not None:
                links[side] = replace(shown, index=position)
                links[f"{side}_run"] = run_id
        out.append(replace(view, **links) if links else view)  # most are shown whole
    return out


@dataclass(frozen=True)
class DiffSide:
    """One side's changes (three-dot: since the merge base; two-dot: a to b): ``patch`` is
    the state's JSON Patch as text (``""``: unchanged), ``counts`` the messages added,
    removed and modified."""

    title: str
    runs: list[Run]
    changes: list[ChangeView]
    patch: str
    counts: dict[str, int]


@dataclass(frozen=True)
class DiffPage:
    """``store.diff(a, b)`` as the diff page shows it: the runs compared, their merge base
    and the mode, as the diff has them, and each side's changes ready to draw. It keeps
    none of the messages the diff compared: what the page shows of them is in its sides,
    and a diff of long views is freed before the page is drawn."""

    a: Run
    b: Run
    merge_base: Run | None
    mode: str
    sides: list[DiffSide]


def diff_page(
    store: Store,
    thread_id: str,
    a: str,
    b: str,
    *,
    mode: str = "three-dot",
    scope: str | None = None,
) -> DiffPage:
    """The diff of two runs or branches, each side's changes ready to draw."""
    d = store.diff(a, b, thread_id=thread_id, mode=mode, scope=scope)
    base = d.merge_base.run_id if d.merge_base else "nothing"
    sides = []
    if d.mode == "three-dot":
        assert d.a_changes is not None
        # Each side's "before" is the merge base's view (none: an empty view).
        base_run = d.merge_base.run_id if d.merge_base else None
        pairs = [
            (f"{base} → {d.a.run_id}", d.a_runs, d.a_changes, (base_run, d.a.run_id)),
            (f"{base} → {d.b.run_id}", d.b_runs, d.changes, (base_run, d.b.run_id)),
        ]
    else:
        pairs = [(f"{d.a.run_id} → {d.b.run_id}", d.b_runs, d.changes, (d.a.run_id, d.b.run_id))]
    for title, runs, change, (before, after) in pairs:
        sides.append(
            DiffSide(
                text.printable(title),
                runs,
                change_views(
                    store, thread_id, change.messages,
                    before_run=before, after_run=after, scope=scope,
                ),
                text.dumps(change.state_patch, indent=2) if change.state_patch else "",
                change.counts(),
            )
        )
    return DiffPage(d.a, d.b, d.merge_base, d.mode, sides)
