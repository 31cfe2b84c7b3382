"""Comparing two runs: their merge base, the runs on each side since it, and what each side
changed, read through the storage port (the comparison itself, on plain values, is
:func:`agui_store.history.diff.compare`)."""

from __future__ import annotations

from agui_store.engine import port
from agui_store.engine.reads import branch_names, run_from_row, run_record
from agui_store.engine.revisions import RunKey
from agui_store.engine.verified import views_past_shared
from agui_store.history.diff import Diff, ViewChange, compare
from agui_store.history.restore import View
from agui_store.records import Run

#: The ways two runs are compared: what each side changed since their merge base (git's
#: ``a...b``), or the two views directly (``a..b``).
MODES = ("three-dot", "two-dot")


def merge_base(tx: port.Reading, a: RunKey, b: RunKey) -> Run | None:
    """The nearest run both ``a`` and ``b`` descend from (either may be it), or ``None``."""
    found = tx.merge_base(a.pk, b.pk)
    return run_record(tx, found[0]) if found else None


def is_ancestor(tx: port.Reading, a: RunKey, b: RunKey) -> bool:
    """Whether ``a`` is on ``b``'s lineage (a run is its own ancestor, as in git)."""
    found = tx.merge_base(a.pk, b.pk)
    return found is not None and found[0] == a.pk


def diff(tx: port.Reading, a: RunKey, b: RunKey, mode: str) -> Diff:
    """Compare run ``a`` with run ``b`` (``mode``: one of :data:`MODES`).

    What it reads follows what the two runs changed, not the thread's length: each side's
    runs down to the merge base, and each run's checkpoint past the chunks and tail segments
    all sides share (compared by address, as git compares trees), with a state they share
    read once."""
    found = tx.merge_base(a.pk, b.pk)
    run_a, run_b, base_run, a_runs, b_runs = diff_sides(tx, a.pk, b.pk, found, a.thread_pk)
    # Each distinct run is loaded once (one side is often the merge base itself); two-dot
    # needs no base.
    with_base = [found[0]] if found and mode == "three-dot" else []
    pks = list(dict.fromkeys([a.pk, b.pk, *with_base]))
    # Without a merge base, three-dot compares each side with an empty view: nothing the
    # sides share may be left out then.
    skip = found is not None or mode == "two-dot"
    views = dict(zip(pks, views_past_shared(tx, pks, skip_shared=skip)))
    view_a, view_b = views[a.pk], views[b.pk]
    if mode == "two-dot":
        return Diff(run_a, run_b, mode, base_run, a_runs, b_runs, _compare(view_a, view_b))
    base = views[found[0]] if found else View([], {}, [], [])
    return Diff(
        run_a, run_b, mode, base_run, a_runs, b_runs, _compare(base, view_b), _compare(base, view_a)
    )


def _compare(old: View, new: View) -> ViewChange:
    """:func:`~agui_store.history.diff.compare` of two views; a view with itself (a side that
    is its merge base) has no change."""
    if old is new:
        return ViewChange([], [])
    return compare(old.messages, old.state, new.messages, new.state)


def diff_sides(
    tx: port.Reading,
    a: int,
    b: int,
    found: tuple[int, int, int] | None,
    thread_pk: int,
) -> tuple[Run, Run, Run | None, list[Run], list[Run]]:
    """A diff's runs: ``a``, ``b``, their merge base, and the runs of each side above
    the base, newest first (whole lineages when there is none). Each side is one walk
    from its run down to the base, which it includes (so no run is read twice), and
    the branches naming them are read once for all (``thread_pk``: ``a``'s thread)."""
    if found is None:
        a_rows, b_rows = tx.lineage_runs(a, None, None), tx.lineage_runs(b, None, None)
        a_side, b_side, base_row = a_rows, b_rows, None
    else:
        _, depth_a, depth_b = found
        a_rows = tx.lineage_runs(a, depth_a + 1, depth_a + 1)
        b_rows = tx.lineage_runs(b, depth_b + 1, depth_b + 1)
        a_side, b_side, base_row = a_rows[:depth_a], b_rows[:depth_b], a_rows[depth_a]
    rows = [*a_rows, *b_rows]
    # With a merge base both runs are on one lineage, so in one thread.
    threads = None if found is None else [thread_pk]
    names = branch_names(tx, sorted({int(r.pk) for r in rows}), threads)
    run_a = run_from_row(a_rows[0], names)
    run_b = run_from_row(b_rows[0], names)
    base_run = run_from_row(base_row, names) if base_row is not None else None
    return (
        run_a,
        run_b,
        base_run,
        [run_from_row(r, names) for r in a_side],
        [run_from_row(r, names) for r in b_side],
    )
