"""What the command line adds to the records' own text: the run tree and coloured diffs.

The records (:mod:`agui_store.records`) know how they look (``str``, ``_repr_html_``,
``to_json``); this module draws what spans several of them for a terminal: the run tree of
``log --graph`` and a diff painted in colour.
"""

from __future__ import annotations

from collections.abc import Sequence

from agui_store.records import (
    Diff,
    Run,
    diff_lines,
    hash_label,
    on_terminal,
    one_line,
    printable,
    short,
)

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
    sides meet at. The lines are git's: after a run, a line that joins its parent's column
    moves one step left a row (``/``, crossing the lines between), as git's graph.c moves it.
    """
    listed = {r.run_id for r in runs}
    summaries = summaries or {}
    columns: list[str] = []  # each column waits for the run it will show next
    lines: list[str] = []
    collapsed: list[int] | None = None  # the last row's mapping, if lines moved in it
    for run in reversed(runs):
        parent = run.parent_run_id if run.parent_run_id in listed else None
        new_columns: list[str] = []
        # A row has a slot per character: column i's line is drawn in slot 2 * i, and the odd
        # slots are the spaces between lines, where a line moving left passes. mapping[slot]
        # is the column the line in that slot goes to in the next row (-1: no line there).
        mapping = [-1] * (2 * len(columns) + 2)
        width = 0
        col = len(columns)  # a run no column waits for opens one at the right
        for i, waits_for in enumerate([*columns, run.run_id] if run.run_id not in columns
                                      else columns):
            if waits_for == run.run_id:
                col = i
                if parent is None:  # its line ends here
                    width += 2
                    continue
                waits_for = parent
            if waits_for not in new_columns:
                new_columns.append(waits_for)
            mapping[width] = new_columns.index(waits_for)
            width += 2
        refs = f" ({', '.join(run.branches)})" if run.branches else ""
        words = summaries.get(run.run_id, "")
        said = f' "{short(words, 48)}"' if words else ""
        star = "o" if run.run_id == boundary else "*"
        marks = " ".join(
            star if i == col
            # a line that was moving left as the row above ended goes on moving: "/"
            else "/" if collapsed is not None and collapsed[2 * i + 1] == i
            and 0 <= mapping[2 * i] < i
            else "|"
            for i in range(max(len(columns), col + 1))
        )
        label = hash_label(run)
        lines.append(  # one line a run, whatever its id holds (a newline: its escape)
            one_line(printable(
                f"{marks} {run.run_id}{refs} {run.status} {run.event_count} ev"
                f"{' ' + label if label else ''}{said}"
            ))
        )
        size = len(mapping)
        while size > 1 and mapping[size - 1] < 0:
            size -= 1
        collapsed = None
        # Lines whose column moved left (a column ended, or two lines joined one parent) walk
        # there a row at a time, each row one slot further, until every line is in place.
        while any(t >= 0 and t != i // 2 for i, t in enumerate(mapping[:size])):
            row, collapsed, mapping, size = _collapsing_row(mapping, size)
            lines.append(row)
        columns = new_columns
    return lines


def _collapsing_row(old: list[int], size: int) -> tuple[str, list[int], list[int], int]:
    """One row of lines moving left towards the columns they join (git's
    ``graph_output_collapsing_line``): the row, where its lines went, the mapping the next
    row starts from, and its width."""
    mapping = [-1] * len(old)
    # Of the lines that move, the first (from the left) may run along the row as "_" to its
    # column at once; the others take one slot a row. The edge is the slot that line comes
    # from; the gaps it runs through (the odd slots from just right of its column's "/" to
    # just left of itself) are claimed for it, so no other line lands there.
    edge, edge_target = -1, -1
    for i in range(size):  # where each line of the row above goes in this row
        target = old[i]
        if target < 0:
            continue
        if target * 2 == i:  # in its place: it stays
            mapping[i] = target
        elif mapping[i - 1] < 0:  # nothing in the slot to its left: it takes it
            mapping[i - 1] = target
            if edge == -1:
                edge, edge_target = i, target
                for j in range(target * 2 + 3, i - 2, 2):
                    mapping[j] = target
        elif mapping[i - 1] == target:  # the line to its left goes to its column: they join
            pass
        else:  # the line to its left goes elsewhere: it crosses it, two slots left
            mapping[i - 2] = target
            if edge == -1:
                edge, edge_target = i - 1, target
                for j in range(target * 2 + 3, i - 2, 2):
                    mapping[j] = target
    if mapping[size - 1] < 0:
        size -= 1
    went = list(mapping)
    # Drawing the row: a line in its place is "|", the edge's run "_", a step left "/". The
    # run goes on into the next row from its leftmost "_" alone (next to its column): its
    # other slots leave the mapping, and so does a "/" drawn left of the edge after it.
    row = []
    horizontal = False
    for i in range(size):
        target = mapping[i]
        if target < 0:
            row.append(" ")
        elif target * 2 == i:
            row.append("|")
        elif target == edge_target and i != edge - 1:
            if i != target * 2 + 3:
                mapping[i] = -1
            horizontal = True
            row.append("_")
        else:
            if horizontal and i < edge:
                mapping[i] = -1
            row.append("/")
    return "".join(row).rstrip(), went, mapping, size


def _paint(line: str, color: bool) -> str:
    if not color or not line:
        return line
    line = on_terminal(line)  # colours go to a terminal: the stored text's controls do not
    code = _COLORS.get(line[0])
    return f"{code}{line}{_RESET}" if code else line


def diff_text(d: Diff, *, color: bool = False, stat: bool = False) -> str:
    """A unified view (see :func:`agui_store.records.diff_lines`), in colour on request."""
    return printable("\n".join(_paint(line, color) for line in diff_lines(d, stat=stat)))
