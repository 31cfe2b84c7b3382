"""A thread's view as derivation leaves it and the cache keeps it: the replayed reducer, its
lineage ids, and what the runs since the lineage's last checkpoint did.

Its own module, below both :mod:`agui_store.engine.derivation` (which builds these) and
:mod:`agui_store.engine.cache` (which keeps them between calls), so neither imports the other.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from agui_store.engine import checkpoints
from agui_store.history.restore import RunRecord, View, named_ids, view_of
from agui_store.protocol.reducer import Reducer


@dataclass
class SinceCheckpoint:
    """The newest checkpoint on a cached view's lineage, and what the runs after it did:
    what the next checkpoint needs to be written as a delta of it."""

    run_pk: int | None  # None: no checkpoint on the lineage (the next one stores all)
    layout: checkpoints.Layout | None  # where its message list is stored
    length: int = 0  # how many messages it holds
    # How many of its leading positions still hold the objects they held then (edited in
    # place perhaps: ``names`` says which): what the reducer's take_unmoved() reported
    # run by run. The next checkpoint shares their chunks without comparing the lists.
    unmoved: int = 0
    names: set[str] = field(default_factory=set)  # ids the runs since then named
    snapshot: bool = False  # a MESSAGES_SNAPSHOT since then
    had_input: bool = False  # a recorded input since then
    events: int = 0  # events since then: what a checkout from it replays
    # The checkpoint on the lineage whose state is stored whole, which the reducer's
    # state_deltas patch into the current state, and the size of that state's JSON text.
    state_anchor: int | None = None
    state_bytes: int = 0
    state_address: bytes | None = None  # its state's address (None: read when needed)

    def note(self, record: RunRecord) -> tuple[set[str], bool]:
        """Count a run replayed since the checkpoint; returns what its events name (see
        :func:`~agui_store.history.restore.named_ids`)."""
        names, snapshot = named_ids(record.events)
        self.names |= names
        self.snapshot |= snapshot
        self.had_input |= record.input is not None
        self.events += len(record.events)
        return names, snapshot

    def settle(self, unmoved: int) -> None:
        """Fold in what the reducer reports of the runs replayed since the last report."""
        self.unmoved = min(self.unmoved, unmoved)

    @classmethod
    def start(
        cls, length: int, snap: checkpoints.Snapshot | None, run_pk: int | None
    ) -> SinceCheckpoint:
        """At a loaded checkpoint of ``length`` messages (``snap``; ``None``: before any)."""
        if snap is None:
            return cls(None, None)
        return cls(
            run_pk,
            snap.layout,
            length,
            length,
            state_anchor=snap.state_anchor,
            state_bytes=snap.state_bytes,
            state_address=snap.state_address,
        )


@dataclass
class CachedView:
    """The newest completed run of a thread, replayed, kept in memory so that the next run
    costs a replay of that run alone. The reducer consumes it (mutates it)."""

    run_pk: int | None  # None: the empty view before a thread's first run
    reducer: Reducer  # holds the view, with its indexes: the next run continues it
    ids_hasher: Any  # sha256 state over the view's lineage ids (extends when the list grows)
    since: SinceCheckpoint
    lineage: list[Any]  # the view's lineage ids (lineage_ids), what rule 3 compares
    # The newest event the view was replayed after (None: not known). A run of its lineage
    # that holds a later event grew since, and the view no longer shows it: another
    # writer continued it, and what it dropped may have been derived again since, under
    # the same lineage digest.
    seen_seq: int | None = None

    @property
    def view(self) -> View:
        """The view the reducer holds."""
        return view_of(self.reducer)
