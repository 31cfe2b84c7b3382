"""How a run's view is composed from its lineage (docs/design/restoring.md) — pure, no storage.

``view(R)`` starts from the view of R's lineage parent (or from nothing), lets R's recorded
input take over where the client sent one, then runs R's events through the official
reducer. The storage layer only fetches ``(input, events)`` for each run of the chain.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from agui_store.history.normalize import expand_input
from agui_store.protocol.reducer import Reducer


@dataclass
class RunRecord:
    """One run of an ancestor chain, as the restorer needs it.

    ``input_refs``: what the input names in the lineage parent's view instead of repeating
    it (:mod:`agui_store.history.normalize`); ``input`` then lacks those keys.
    """

    input: dict[str, Any] | None
    events: Sequence[dict[str, Any]]
    input_refs: dict[str, Any] | None = None
    #: The same for the ``input`` its RUN_STARTED echoed (stored normalized).
    echo_refs: dict[str, Any] | None = None
    #: ``input`` is a request body that continued no restored view (its parent was not
    #: named, and lineage rule 3 found none): its messages are the run's start, as sent.
    as_sent: bool = False


def body_as_sent(has_input: bool, lineage: str) -> bool:
    """Whether a run starts from its recorded request body's messages as sent
    (docs/design/restoring.md): a body whose parent was neither named (lineage rules 1, 2)
    nor found by its messages (rule 3), so it was placed at the head (``lineage`` is the run's
    reason). With rule 3 the body continues its parent's view, whose messages it holds but for
    the activity messages a client strips from what it sends: those stay, in place."""
    return has_input and lineage == "head"


def effective_input(
    record: RunRecord, parent_messages: Sequence[dict[str, Any]] = (), parent_state: Any = None
) -> dict[str, Any] | None:
    """The input a run starts from: the request body recorded at append time (expanded
    against the parent's view where it was normalized), else the ``RUN_STARTED.input`` a
    producer echoed (docs/design/restoring.md)."""
    if record.input is not None:
        if record.input_refs is not None:
            return expand_input(record.input, record.input_refs, parent_messages, parent_state)
        return record.input
    first = record.events[0] if record.events else None
    if first is not None and first.get("type") == "RUN_STARTED":
        echoed = first.get("input")
        if isinstance(echoed, dict):
            return echoed
    return None


def start_of_run(
    base_messages: list[dict[str, Any]],
    base_state: Any,
    run_input: dict[str, Any] | None,
    *,
    as_sent: bool = False,
) -> tuple[list[dict[str, Any]], Any]:
    """The messages and state a run starts from (docs/design/restoring.md).

    A client that sent the whole history (``HttpAgent`` does) is believed as sent, and so is
    a request body that continued no restored view (``as_sent``: a fresh client on an
    existing thread, an edited first message): it is what that client holds. Any other
    input missing some of the lineage's messages is a normalized one (it names only what is
    new), or a client's body that left out the activity messages it holds (``HttpAgent``
    strips them): the lineage's messages come first and the input's new ones follow.
    """
    if run_input is None:
        return base_messages, base_state
    sent = run_input.get("messages")
    if not isinstance(sent, list):
        sent = []
    sent_ids = {m.get("id") for m in sent if isinstance(m, dict)}
    if as_sent or all(m.get("id") in sent_ids for m in base_messages):
        messages = list(sent)
    else:
        known = {m.get("id") for m in base_messages}
        messages = base_messages + [
            m for m in sent if isinstance(m, dict) and m.get("id") not in known
        ]
    state = run_input.get("state", base_state)
    return messages, state


@dataclass
class View:
    """The leaf's restored view, and every warning the reducer gave on the way."""

    messages: list[dict[str, Any]]
    state: Any
    interrupts: list[dict[str, Any]]
    warnings: list[str]


def start_reducer(start: View | None = None) -> Reducer:
    """A reducer holding ``start`` (taking ownership of it), or nothing."""
    if start is None:
        return Reducer([], {}, copy=False)
    reducer = Reducer(start.messages, start.state, copy=False, pending_interrupts=start.interrupts)
    reducer.warnings[:0] = start.warnings  # in place: the chunk expander shares the list
    return reducer


def apply_run(reducer: Reducer, record: RunRecord) -> None:
    """One run of a lineage on top of its parent's view, which ``reducer`` holds."""
    if record.echo_refs is not None and record.events:
        started = record.events[0]
        started["input"] = expand_input(
            started["input"], record.echo_refs, reducer.messages, reducer.state
        )
    run_input = effective_input(record, reducer.messages, reducer.state)
    as_sent = record.as_sent and record.input is not None
    # An input that resends the lineage's messages and adds some (what HttpAgent sends, as
    # its stored references expand), or that sends only new ones, continues the reducer's
    # list instead of replacing it: the run costs what it adds, not the history.
    if run_input is not None:
        state = run_input.get("state", reducer.state)
        if reducer.continue_start(run_input.get("messages"), state):
            reducer.feed(record.events)
            return
        added = _added_messages(reducer, run_input, as_sent=as_sent)
        if added is not None and reducer.extend_start(added, state):
            reducer.feed(record.events)
            return
    messages, state = start_of_run(reducer.messages, reducer.state, run_input, as_sent=as_sent)
    # Free when the run has no input: the reducer keeps its own lists and indexes.
    reducer.reset_start(messages, state)
    reducer.feed(record.events)


def _added_messages(
    reducer: Reducer, run_input: dict[str, Any], *, as_sent: bool
) -> list[dict[str, Any]] | None:
    """The messages :func:`start_of_run` puts after the reducer's list (``None``: it starts
    the run from another list), found through the reducer's index of ids instead of a set
    of the whole list's: the same messages when every message sent has a string id."""
    base = reducer.messages
    if as_sent or not base:
        return None
    sent = run_input.get("messages")
    if not isinstance(sent, list):
        sent = []
    sent_ids = {m.get("id") for m in sent if isinstance(m, dict)}
    if all(m.get("id") in sent_ids for m in base):  # stops at the first one not sent
        return None
    if not all(type(m) is dict and type(m.get("id")) is str for m in sent):
        return None
    return [m for m in sent if not reducer.holds_id(m["id"])]


def view_of(reducer: Reducer) -> View:
    """The view a reducer holds: messages, state, pending interrupts and warnings."""
    return View(reducer.messages, reducer.state, reducer.pending_interrupts, reducer.warnings)


def restore(chain: Iterable[RunRecord], *, start: View | None = None) -> View:
    """Replay an ancestor chain, root first (from ``start`` when given, e.g. a checkpoint).

    The records must be the caller's to give away (freshly decoded): the reducer takes
    ownership of their values instead of copying them, which keeps a deep chain linear.
    """
    reducer = start_reducer(start)
    for record in chain:
        apply_run(reducer, record)
    return view_of(reducer)


#: The event fields that name a message or a tool call an event can reach.
ID_KEYS = ("messageId", "toolCallId", "parentMessageId", "entityId")


def named_ids(events: Sequence[dict[str, Any]]) -> tuple[set[str], bool]:
    """The ids a run's events name (what they can reach in the view), and whether one of
    them is a MESSAGES_SNAPSHOT (which can reach every message): a message no event names
    keeps its content, which is what lets a checkpoint share the chunks before it."""
    # A key at a time, each pass in C (map of dict.get: no bytecode per event).
    if "MESSAGES_SNAPSHOT" in set(map(dict.get, events, itertools.repeat("type"))):
        return set(), True
    named: set[Any] = set()
    for key in ID_KEYS:
        named.update(map(dict.get, events, itertools.repeat(key)))
    return {name for name in named if type(name) is str}, False


def reached(reducer: Reducer, names: Iterable[str]) -> list[tuple[Any, Any, Any]]:
    """The messages these ids reach, each with the id and role it holds now: taken before a
    run, what :func:`only_appended` needs to tell a list that grew from one that changed."""
    return [(m, m.get("id"), m.get("role")) for m in reducer.holders(names)]


def only_appended(
    before: int, unmoved: int, reached_before: list[tuple[Any, Any, Any]], snapshot: bool
) -> bool:
    """Whether a run that found ``before`` messages only appended to their lineage ids: no
    snapshot, no position moved (``unmoved``: the reducer's take_unmoved()), and no message
    its events reached took another id or role. Then the ids' digest extends instead of
    hashing the history again."""
    return (
        not snapshot
        and unmoved >= before
        and all(m.get("id") == mid and m.get("role") == role for m, mid, role in reached_before)
    )
