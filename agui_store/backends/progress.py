"""A migration's progress on a terminal: what a backend shows while it rebuilds derived
data for a store written by an earlier version (the search index, for one), when stderr is
a terminal. Nothing is written otherwise, so a server's logs stay as they were."""

from __future__ import annotations

import contextlib
import sys
import time
from collections.abc import Callable, Iterator
from typing import TextIO


@contextlib.contextmanager
def on_terminal(
    label: str, *, unit: str = "", stream: TextIO | None = None
) -> Iterator[Callable[[int, int], None]]:
    """A ``progress(done, total)`` callback drawing a one-line bar on ``stream`` (stderr),
    at most ten times a second, when it is a terminal; the line is ended on exit."""
    out = stream or sys.stderr
    enabled = bool(getattr(out, "isatty", lambda: False)())
    drawn = False
    last = 0.0

    def show(done: int, total: int) -> None:
        nonlocal drawn, last
        now = time.monotonic()
        if not enabled or (now - last < 0.1 and done < total):
            return
        last, drawn = now, True
        width = 30
        filled = width * done // max(total, 1)
        out.write(f"\r{label} [{'#' * filled}{'.' * (width - filled)}] {done}/{total} {unit}")
        out.flush()

    try:
        yield show
    finally:
        if drawn:
            out.write("\n")
            out.flush()


__all__ = ["on_terminal"]
