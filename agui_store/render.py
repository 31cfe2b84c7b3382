"""How results look to a person: terminal text and compact HTML tables for notebooks.

Pure presentation over records (``Checkout``, runs, ``Diff``); the CLI and the ``__str__`` /
``_repr_html_`` of the records all come here, so a notebook and a terminal show the same.
"""

from __future__ import annotations

import html
import json
import re
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from agui_store.diff import Diff, MessageChange, ViewChange
    from agui_store.records import Checkout, Run

_COLORS = {"+": "\033[32m", "-": "\033[31m", "~": "\033[33m", "@": "\033[36m", "*": "\033[1m"}
_RESET = "\033[0m"
_SURROGATE = re.compile("[\ud800-\udfff]")


def printable(text: str) -> str:
    """Text any UTF-8 writer accepts: what the store reads back may hold lone surrogates
    (JSON's ``"\\ud83d"``, which JavaScript producers emit when they split an emoji), and
    those cannot be encoded. A high and low surrogate side by side join into the character
    they spell together (as JavaScript reads them); any other surrogate is written as its
    JSON escape ``\\udXXX``, which keeps JSON output valid JSON that decodes to the same text.
    """
    try:
        text.encode("utf-8")  # C speed; a regex search costs as much as a transcript
        return text
    except UnicodeEncodeError:
        pass
    joined = text.encode("utf-16-le", "surrogatepass").decode("utf-16-le", "surrogatepass")
    return _SURROGATE.sub(lambda m: f"\\u{ord(m.group()):04x}", joined)


def short(text: str, width: int) -> str:
    text = " ".join(text.split())
    return text if len(text) <= width else text[: width - 1] + "…"


def content_text(content: Any) -> str:
    """A message's content as plain text (text parts joined, other parts as [type])."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        parts = []
        for part in content:
            if isinstance(part, dict):
                parts.append(
                    str(part.get("text", ""))
                    if part.get("type") == "text"
                    else f"[{part.get('type')}]"
                )
        return " ".join(parts)
    if content is None:
        return ""
    return json.dumps(content, ensure_ascii=False)


def message_line(m: dict[str, Any]) -> str:
    """One message as one readable line."""
    role = m.get("role", "?")
    if role == "assistant" and m.get("toolCalls"):
        calls = ", ".join(
            f"{c.get('function', {}).get('name')}({c.get('function', {}).get('arguments', '')})"
            for c in m["toolCalls"]
            if isinstance(c, dict)
        )
        text = content_text(m.get("content"))
        return f"assistant: {text + ' ' if text else ''}-> {calls}"
    if role == "tool":
        return f"tool[{m.get('toolCallId')}]: {content_text(m.get('content'))}"
    if role == "activity":
        return (
            f"activity[{m.get('activityType')}]: {json.dumps(m.get('content'), ensure_ascii=False)}"
        )
    return f"{role}: {content_text(m.get('content'))}"


def transcript(co: Checkout) -> str:
    """A restored run as a readable transcript, then its state."""
    run = co.run
    lines = [f"run {run.run_id}{_hash_tag(run)} (thread {run.thread_id}) - {run.status}", ""]
    lines += [message_line(m) for m in co.messages]
    if co.interrupts:
        lines += ["", "pending interrupts:"]
        lines += [
            f"  {i.get('id')}: {i.get('reason')} {i.get('message', '')}".rstrip()
            for i in co.interrupts
        ]
    lines += ["", "state:", json.dumps(co.state, indent=2, ensure_ascii=False)]
    return printable("\n".join(lines))


def _cell(text: str, width: int = 120) -> str:
    return html.escape(short(text, width))


def checkout_html(co: Checkout) -> str:
    rows = "".join(
        f"<tr><td>{_cell(str(m.get('role', '')))}</td><td><code>{_cell(str(m.get('id', '')), 24)}"
        f"</code></td><td>{_cell(message_line(m).split(': ', 1)[-1])}</td></tr>"
        for m in co.messages
    )
    state = html.escape(short(json.dumps(co.state, ensure_ascii=False), 300))
    return printable(
        f"<div><b>run {html.escape(co.run.run_id)}</b> ({html.escape(co.run.status)}, "
        f"{len(co.messages)} messages)<table><tr><th>role</th><th>id</th><th>content</th></tr>"
        f"{rows}</table><div>state: <code>{state}</code></div></div>"
    )


def _hash_tag(run: Run) -> str:
    """`` [3f2a9c01b7de]``: the run's short hash, as git shows a commit's (``+`` after it
    while the run is live: the hash of what was recorded so far)."""
    if run.short_hash is None:
        return ""
    return f" [{run.short_hash}{'' if run.is_complete else '+'}]"


def _hash_suffix(run: Run, gap: str) -> str:
    """The short hash after a run's line (its first word stays the run id, which scripts
    read), ``+`` after it while the run is live."""
    tag = _hash_tag(run)
    return f"{gap}{tag[2:-1]}" if tag else ""


def run_line(run: Run) -> str:
    refs = f" ({', '.join(run.branches)})" if run.branches else ""
    parent = f" <- {run.parent_run_id} [{run.lineage}]" if run.parent_run_id else " [root]"
    return (
        f"{run.run_id}{refs}  {run.status}  {run.event_count} events{parent}"
        f"{_hash_suffix(run, '  ')}"
    )


def runs_text(runs: Sequence[Run]) -> str:
    return printable("\n".join(run_line(r) for r in runs))


def runs_html(runs: Sequence[Run]) -> str:
    rows = "".join(
        f"<tr><td><code>{_cell(r.run_id, 40)}</code></td><td>{_cell(', '.join(r.branches))}</td>"
        f"<td>{_cell(r.status)}</td><td>{_cell(r.parent_run_id or '')}</td>"
        f"<td>{_cell(r.lineage)}</td><td>{r.event_count}</td>"
        f"<td>{_cell(r.created_at.isoformat(timespec='seconds'))}</td>"
        f"<td><code>{_cell(_hash_tag(r)[2:-1])}</code></td></tr>"
        for r in runs
    )
    return printable(
        "<table><tr><th>run</th><th>branches</th><th>status</th><th>parent</th>"
        f"<th>lineage</th><th>events</th><th>created</th><th>hash</th></tr>{rows}</table>"
    )


def graph(runs: Sequence[Run], summaries: dict[str, str] | None = None) -> list[str]:
    """The run tree like ``git log --graph --oneline``: newest first, a column per open line.

    Runs of one thread only; a parent's key is always older than its children's, so
    creation order newest-first lists every child before its parent.
    """
    summaries = summaries or {}
    order = sorted(runs, key=lambda r: r.created_at, reverse=True)
    # created_at can tie; recorded order (the input's order) breaks ties.
    position = {r.run_id: i for i, r in enumerate(runs)}
    order.sort(key=lambda r: (r.created_at, position[r.run_id]), reverse=True)
    columns: list[str | None] = []  # each column waits for the run it will show next
    lines: list[str] = []
    for run in order:
        waiting = [i for i, c in enumerate(columns) if c == run.run_id]
        if not waiting:
            columns.append(run.run_id)
            waiting = [len(columns) - 1]
        col = waiting[0]
        # Siblings meet at their parent: fold the extra columns in, git's "|/".
        for extra in reversed(waiting[1:]):
            lines.append("| " * (extra - 1) + "|/")
            del columns[extra]
        refs = f" ({', '.join(run.branches)})" if run.branches else ""
        words = summaries.get(run.run_id, "")
        said = f' "{short(words, 48)}"' if words else ""
        marks = " ".join("*" if i == col else "|" for i in range(len(columns)))
        lines.append(
            printable(
                f"{marks} {run.run_id}{refs} {run.status} {run.event_count} ev"
                f"{_hash_suffix(run, ' ')}{said}"
            )
        )
        if run.parent_run_id is None:
            del columns[col]
        else:
            columns[col] = run.parent_run_id
    return lines


def _paint(line: str, color: bool) -> str:
    if not color or not line:
        return line
    code = _COLORS.get(line[0])
    return f"{code}{line}{_RESET}" if code else line


def _change_lines(change: ViewChange) -> list[str]:
    out: list[str] = []
    for m in change.messages:
        out += _message_change_lines(m)
    for op in change.state_patch:
        value = f" {json.dumps(op['value'], ensure_ascii=False)}" if "value" in op else ""
        source = f" from {op['from']}" if "from" in op else ""
        out.append(f"~ state {op['op']} {op['path'] or '/'}{source}{value}")
    return out or ["  (no change)"]


def _message_change_lines(m: MessageChange) -> list[str]:
    if m.kind == "added":
        assert m.after is not None
        return [f"+ [{m.id}] {message_line(m.after)}"]
    if m.kind == "removed":
        assert m.before is not None
        return [f"- [{m.id}] {message_line(m.before)}"]
    assert m.before is not None and m.after is not None
    return [f"- [{m.id}] {message_line(m.before)}", f"+ [{m.id}] {message_line(m.after)}"]


def diff_text(d: Diff, *, color: bool = False, stat: bool = False) -> str:
    """A unified view: both sides since the merge base (three-dot) or A against B."""
    base = d.merge_base.run_id if d.merge_base else "nothing"
    dots = "..." if d.mode == "three-dot" else ".."
    lines = [f"@ diff {d.a.run_id}{dots}{d.b.run_id} (merge base: {base})"]
    lines.append(
        f"  runs only on {d.a.run_id}'s side: {', '.join(r.run_id for r in d.a_runs) or '-'}"
    )
    lines.append(
        f"  runs only on {d.b.run_id}'s side: {', '.join(r.run_id for r in d.b_runs) or '-'}"
    )
    sides: list[tuple[str, ViewChange]] = []
    if d.mode == "three-dot":
        assert d.a_changes is not None
        sides = [(f"{base} -> {d.a.run_id}", d.a_changes), (f"{base} -> {d.b.run_id}", d.changes)]
    else:
        sides = [(f"{d.a.run_id} -> {d.b.run_id}", d.changes)]
    for title, change in sides:
        if stat:
            c = change.counts()
            lines.append(
                f"  {title}: +{c['added']} -{c['removed']} ~{c['modified']} messages, "
                f"{len(change.state_patch)} state op(s)"
            )
        else:
            lines.append(f"@ {title}")
            lines += _change_lines(change)
    return printable("\n".join(_paint(line, color) for line in lines))


def diff_html(d: Diff) -> str:
    def table(change: ViewChange) -> str:
        rows = "".join(
            f"<tr><td>{m.kind}</td><td><code>{_cell(str(m.id), 24)}</code></td>"
            f"<td>{_cell(message_line(m.before)) if m.before else ''}</td>"
            f"<td>{_cell(message_line(m.after)) if m.after else ''}</td></tr>"
            for m in change.messages
        )
        patch = html.escape(short(json.dumps(change.state_patch, ensure_ascii=False), 300))
        return (
            f"<table><tr><th>change</th><th>id</th><th>before</th><th>after</th></tr>"
            f"{rows}</table><div>state patch: <code>{patch}</code></div>"
        )

    base = html.escape(d.merge_base.run_id) if d.merge_base else "none"
    names = f"{html.escape(d.a.run_id)} vs {html.escape(d.b.run_id)}"
    out = f"<div><b>{names}</b> ({d.mode}, merge base {base})"
    if d.a_changes is not None:
        out += f"<div>{html.escape(d.a.run_id)} side</div>{table(d.a_changes)}"
    out += f"<div>{html.escape(d.b.run_id)} side</div>{table(d.changes)}</div>"
    return printable(out)
