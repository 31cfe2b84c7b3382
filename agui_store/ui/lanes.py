"""The run tree's lanes, as ``git log --graph`` draws them, a page at a time.

Runs come newest first (every child before its parent, as recorded order reversed gives
them). Each lane waits for the run it shows next: a run takes the lane that waits for it
(the leftmost, when its children wait in several: those lanes end at it, git's ``|/``),
or a free lane when nothing waits for it (a branch tip). Lanes keep their place while they
run, so a page continues the one before from the lanes it ended with (``Lanes.columns``).
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from dataclasses import dataclass, field

from agui_store import Run


@dataclass(slots=True)  # not frozen: a frozen dataclass's __init__ costs 4x, per row
class Row:
    """What one run's row draws.

    Attributes:
        run: the run.
        lane: the lane its dot sits in.
        above: lanes with a line from the row's top: each to the dot if it is in
            ``joining``, else straight through.
        joining: lanes that end at the dot (the lane itself first, when a child waited
            in it; other children's lanes fold into it).
        below: lanes with a line to the row's bottom; the dot's own lane when the run has
            a parent (a root's lane ends at it).
        width: how many lanes the row spans.
    """

    run: Run
    lane: int
    above: tuple[int, ...]
    joining: tuple[int, ...]
    below: tuple[int, ...]
    width: int


@dataclass
class Lanes:
    """The lanes between pages: ``columns[i]`` is the run id lane ``i`` waits for, ``None``
    when it is free."""

    columns: list[str | None] = field(default_factory=list)

    def layout(self, runs_newest_first: Sequence[Run]) -> list[Row]:
        """The rows of a page of runs, newest first; ``columns`` is left where the page
        ends, ready for the next one."""
        rows: list[Row] = []
        columns = self.columns
        above = _taken(columns)
        for run in runs_newest_first:
            joining = _waiting(columns, run.run_id)
            if joining:
                lane = joining[0]
            else:
                lane = columns.index(None) if None in columns else len(columns)
                if lane == len(columns):
                    columns.append(None)
            for i in joining:
                columns[i] = None
            columns[lane] = run.parent_run_id
            while columns and columns[-1] is None:
                columns.pop()
            below = _taken(columns)
            width = 1 + max((lane, *above[-1:], *below[-1:]))  # each tuple counts up
            rows.append(Row(run, lane, above, joining, below, width))
            above = below  # the lanes below a row are those above the next
        return rows


def _taken(columns: list[str | None]) -> tuple[int, ...]:
    """The lanes that wait for a run."""
    return tuple(i for i, c in enumerate(columns) if c is not None)


def _waiting(columns: list[str | None], run_id: str) -> tuple[int, ...]:
    """The lanes that wait for the run ``run_id`` (``in`` first: most runs have one child)."""
    if run_id not in columns:
        return ()
    return tuple(i for i, c in enumerate(columns) if c == run_id)


#: Pixels: a lane's width, a row's height, where a row's dot sits.
LANE_PX = 16
ROW_PX = 34
_MID = ROW_PX // 2


def _x(lane: int) -> int:
    return 12 + LANE_PX * lane


def svg(row: Row, width: int) -> str:
    """The row's part of the graph as an inline SVG: the lanes through it, the lanes that end
    at its dot (curving in from their own), and the dot, coloured by status. Only numbers
    and fixed class names go in: nothing to escape."""
    status = row.run.status if row.run.status in _STATUSES else "unknown"
    return _svg(row.lane, row.above, row.joining, row.below, width, status)


@functools.lru_cache(maxsize=4096)
def _svg(
    lane: int, above: tuple[int, ...], joining: tuple[int, ...], below: tuple[int, ...],
    width: int, status: str,
) -> str:
    # Rows repeat: a long chain draws the same row thousands of times.
    px = 8 + LANE_PX * width
    parts = [
        f'<svg class="graph" width="{px}" height="{ROW_PX}" viewBox="0 0 {px} {ROW_PX}" '
        'aria-hidden="true">'
    ]
    at = _x(lane)
    for other in above:
        x = _x(other)
        if other in joining:
            parts.append(
                f'<path class="lane l{other % 6}" d="M{x} 0 C {x} {_MID}, {at} {_MID - 6}, '
                f'{at} {_MID}"/>'
            )
        else:
            parts.append(
                f'<line class="lane l{other % 6}" x1="{x}" y1="0" x2="{x}" y2="{ROW_PX}"/>'
            )
    if lane in below:
        parts.append(
            f'<line class="lane l{lane % 6}" x1="{at}" y1="{_MID}" x2="{at}" y2="{ROW_PX}"/>'
        )
    forked = len(joining) > 1
    parts.append(
        f'<circle class="dot s-{status}{" forked" if forked else ""}" cx="{at}" cy="{_MID}" '
        f'r="{6 if forked else 5}"/></svg>'
    )
    return "".join(parts)


_STATUSES = frozenset({"finished", "interrupted", "cancelled", "error", "incomplete"})
