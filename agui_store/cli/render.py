"""What the command line adds to the records' own text: the run tree and coloured diffs.

The records (:mod:`agui_store.records`) know how they look (``str``, ``_repr_html_``,
``to_json``); this module draws what spans several of them for a terminal: the run tree of
``log --graph`` and a diff painted in colour.
"""

from __future__ import annotations

from collections.abc import Sequence

from agui_store.records import Diff, Run, diff_lines, hash_label, on_terminal, printable, short

_COLORS = {"+": "\033[32m", "-": "\033[31m", "~": "\033[33m", "@": "\033[36m", "*": "\033[1m"}
_RESET = "\033[0m"


def graph(
    runs: Sequence[Run], summaries: dict[str, str] | None = None, boundary: str | None = None
) -> list[str]:
    """The run tree like ``git log --graph --oneline``: newest first, a column per open line.

    Runs of one thread only, in recorded order (oldest first); a parent is always recorded
    before its children, so that order newest-first lists every child before its parent. A
    run whose parent is not among ``runs`` (a range's oldest) ends its line, as a root does.
    ``boundary`` is the run drawn ``o``, as git's ``--boundary`` draws it: a merge base both
    sides meet at.
    """
    listed = {r.run_id for r in runs}
    summaries = summaries or {}
    order = list(reversed(runs))
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
        star = "o" if run.run_id == boundary else "*"
        marks = " ".join(star if i == col else "|" for i in range(len(columns)))
        label = hash_label(run)
        lines.append(
            printable(
                f"{marks} {run.run_id}{refs} {run.status} {run.event_count} ev"
                f"{' ' + label if label else ''}{said}"
            )
        )
        if run.parent_run_id not in listed:
            del columns[col]
        else:
            columns[col] = run.parent_run_id
    return lines


def _paint(line: str, color: bool) -> str:
    if not color or not line:
        return line
    line = on_terminal(line)  # colours go to a terminal: the stored text's controls do not
    code = _COLORS.get(line[0])
    return f"{code}{line}{_RESET}" if code else line


def diff_text(d: Diff, *, color: bool = False, stat: bool = False) -> str:
    """A unified view (see :func:`agui_store.records.diff_lines`), in colour on request."""
    return printable("\n".join(_paint(line, color) for line in diff_lines(d, stat=stat)))
