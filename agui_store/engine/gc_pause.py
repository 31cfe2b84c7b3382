"""The cyclic garbage collector, paused while a call allocates many short-lived objects.

An append decodes its request body (an HttpAgent input holds the whole history: tens of
thousands of dicts, lists and strings), validates and normalizes it, then drops almost all
of it. Those objects are alive while the call runs, so every collection the allocations
trigger walks them, promotes them, and soon triggers a full collection that walks every
object the process holds (a store keeps its threads' views in memory): about a third of
an HttpAgent append at 4,000 messages went to collections that found nothing to free.
Paused, the objects die by reference counting when the call drops them, before any
collection sees them. A checkout decoding its chunks pauses it for the same reason.

The pause is shared: nested or concurrent calls (``aio`` runs calls in threads) keep it
until the last one ends, and it restores what it found: a collector the application
disabled stays disabled. Overlapping calls on a busy server could keep it paused for good,
leaving the application's cyclic garbage uncollected: so a call that ends a pause older
than ``MAX_PAUSE_SECONDS`` while others still hold it runs one collection and starts the
pause anew.
"""

from __future__ import annotations

import contextlib
import functools
import gc
import os
import threading
import time
from collections.abc import Callable, Iterator
from typing import ParamSpec, TypeVar

_lock = threading.Lock()
_holders = 0  # calls inside paused() now
_resume = False  # whether the last holder enables the collector again
_since = 0.0  # when the pause (or its last collection) began, time.monotonic()

#: The longest overlapping calls keep the collector paused before one collection runs.
MAX_PAUSE_SECONDS = 1.0


@contextlib.contextmanager
def paused() -> Iterator[None]:
    """Run the block with the cyclic collector disabled (if it was enabled when the first
    of the overlapping blocks began)."""
    global _holders, _resume, _since
    with _lock:
        if _holders == 0:
            _resume = gc.isenabled()
            if _resume:
                gc.disable()
                _since = time.monotonic()
        _holders += 1
    collect = False
    try:
        yield
    finally:
        with _lock:
            # Never below 0: a forked child resets the count while its forking thread may
            # still be inside a block (see _after_fork_in_child).
            _holders = max(_holders - 1, 0)
            if _holders == 0 and _resume:
                gc.enable()
                _resume = False
            elif _resume and time.monotonic() - _since > MAX_PAUSE_SECONDS:
                _since = time.monotonic()
                collect = True
    if collect:  # outside the lock: a collection runs finalizers, which may pause too
        gc.collect()


_P = ParamSpec("_P")
_R = TypeVar("_R")


#: How many records a read builds before pausing pays: a pause costs a few microseconds,
#: which a page of twenty runs notices, and saves the collections a list of thousands of
#: records triggers (``bench_log``, ``benchmarks/compare_trees.py``).
MANY_RECORDS = 1000


def paused_for(records: int | None) -> contextlib.AbstractContextManager[None]:
    """:func:`paused` for a read that builds up to ``records`` records (``None``: no
    bound), a block that changes nothing for fewer than :data:`MANY_RECORDS`."""
    if records is not None and records < MANY_RECORDS:
        return contextlib.nullcontext()
    return paused()


def pausing(call: Callable[_P, _R]) -> Callable[_P, _R]:
    """``call`` run inside :func:`paused` (a method decorator)."""

    @functools.wraps(call)
    def paused_call(*args: _P.args, **kwargs: _P.kwargs) -> _R:
        with paused():
            return call(*args, **kwargs)

    return paused_call


def _after_fork_in_child() -> None:
    """A child forked while another thread held the pause would never get the collector
    back (that thread does not exist in the child): the child resumes what was paused."""
    global _holders, _resume, _lock
    # The lock may have been held by a thread that is gone: the child gets a fresh one.
    _lock = threading.Lock()
    if _holders and _resume:
        gc.enable()
    _holders, _resume = 0, False


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork_in_child)
