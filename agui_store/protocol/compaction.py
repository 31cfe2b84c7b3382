"""Event compaction: a port of ``compactEvents`` from ``@ag-ui/client`` 1.0.0.

:func:`compact_events` returns what the official client's ``compactEvents`` returns, for any
list of events:

* a text message's CONTENT events become one CONTENT (the deltas joined, the metadata of
  every delta and of a START replayed after them merged), a tool call's ARGS likewise; the
  group is emitted when its END arrives — START, merged delta, END — followed by every other
  event that arrived while it was open;
* a START replayed before any delta merges its metadata into the first START; replayed
  after deltas, its other fields win and its metadata joins the merged delta's;
* STATE_SNAPSHOT / STATE_DELTA events wait for the next RUN_STARTED, RUN_FINISHED, RUN_ERROR
  or the end of the input: a window without a snapshot passes through unchanged, otherwise it
  becomes one STATE_SNAPSHOT — the last snapshot with the later deltas applied (a failing
  patch is skipped), carrying the merged metadata of every event in the window;
* synthesized events carry only ``type``, the id, ``delta``/``snapshot`` and ``metadata``:
  ``timestamp``, ``rawEvent`` and ``subagentRunId`` of the merged events are dropped;
* groups still open at the end of the input are emitted there, text before tools.

Events the client passes through are returned as the same objects; synthesized and merged
events are new dicts. The input is never modified.

``close_open=True`` fixes upstream issue #2813 (``compactEvents`` emits a stream
``verifyEvents`` rejects when a run ends with an open tool call or message). Before each
RUN_FINISHED or RUN_ERROR, every group still pending is emitted — START, merged delta, the
events buffered behind it — instead of after the terminal event:

* before RUN_ERROR the group is left open, exactly as upstream's newer test
  ``compact.terminal-boundary.test.ts`` expects ("keeps an incomplete tool call before
  RUN_ERROR": ``RUN_STARTED, TOOL_CALL_START, TOOL_CALL_ARGS, RUN_ERROR``). An aborted
  stream stays visibly incomplete, ``verifyEvents`` accepts it (RUN_ERROR may cut streams
  off), and a replay builds the same partial message or tool call;
* before RUN_FINISHED a group that has a START also gets a synthesized END
  (``{"type": "TEXT_MESSAGE_END", "messageId": ...}`` / ``TOOL_CALL_END``), because
  ``verifyEvents`` refuses RUN_FINISHED while anything is open. A legal stream never has an
  open group there, so this only repairs illegal input; an END without metadata changes
  nothing on replay;
* a group without a START (an orphan CONTENT or ARGS) is emitted as it is, after the
  closed ones.

Put in upstream's own terms: ``close_open`` output is ``compactEvents`` applied to each run
separately (cut after every RUN_FINISHED / RUN_ERROR), the run end held back until the run's
buffers are out, with an END appended for every message or tool call a RUN_FINISHED would
otherwise find open.

The group of one run therefore never absorbs a START with the same id from a later run (the
"replayed later runs" case of #2813). When no group is pending at any terminal event, the
output is identical to upstream's.
"""

from __future__ import annotations

import itertools
import json
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any, Final

from agui_store.errors import InvalidEventError
from agui_store.protocol.js import (
    UNDEFINED,
    ToPrimitiveError,
    as_double,
    check_stringable,
    js_join,
    utf16_units,
)
from agui_store.protocol.patch import PatchError, apply_patch

__all__ = ["compact_events"]


_TEXT: Final = ("TEXT_MESSAGE_START", "TEXT_MESSAGE_CONTENT", "TEXT_MESSAGE_END", "messageId")
_TOOL: Final = ("TOOL_CALL_START", "TOOL_CALL_ARGS", "TOOL_CALL_END", "toolCallId")
_STATE_TYPES: Final = frozenset({"STATE_SNAPSHOT", "STATE_DELTA"})
_TERMINAL_TYPES: Final = frozenset({"RUN_FINISHED", "RUN_ERROR"})


@dataclass
class _Group:
    """One text message or tool call being buffered (upstream's ``pending`` entry)."""

    id: Any  # the id as the event that opened the entry spelled it
    start: dict[str, Any] | None = None
    deltas: list[dict[str, Any]] = field(default_factory=list)
    end: dict[str, Any] | None = None
    others: list[Any] = field(default_factory=list)
    post_start_metadata: Any = UNDEFINED


class _Compactor:
    def __init__(self, *, close_open: bool, warnings: list[str] | None) -> None:
        self.close_open = close_open
        self.warnings = warnings
        self.out: list[Any] = []
        self.texts: dict[Any, _Group] = {}
        self.tools: dict[Any, _Group] = {}
        self.state_window: list[dict[str, Any]] = []
        self._object_ids: Iterator[int] = itertools.count()

    def feed(self, index: int, event: Any) -> None:
        if event is None:
            raise InvalidEventError("an event is null", index=index)
        kind = event.get("type") if isinstance(event, dict) else None
        if not isinstance(kind, str):
            self._other(event)
        elif kind in _TEXT[:3]:
            self._stream(event, kind, self.texts, _TEXT)
        elif kind in _TOOL[:3]:
            self._stream(event, kind, self.tools, _TOOL)
        elif kind == "RUN_STARTED":
            self._flush_state()
            self.out.append(event)
        elif kind in _TERMINAL_TYPES:
            if self.close_open:
                self._flush_pending(close=kind == "RUN_FINISHED")
            self._flush_state()
            self.out.append(event)
        elif kind in _STATE_TYPES:
            self.state_window.append(event)
        else:
            self._other(event)

    def finish(self) -> list[Any]:
        self._flush_pending(close=False)
        self._flush_state()
        return self.out

    # -- text messages and tool calls

    def _stream(
        self,
        event: dict[str, Any],
        kind: str,
        groups: dict[Any, _Group],
        names: tuple[str, str, str, str],
    ) -> None:
        start_type, _, end_type, id_field = names
        entity_id = event.get(id_field, UNDEFINED)
        key = self._map_key(entity_id)
        group = groups.get(key)
        if group is None:
            group = groups[key] = _Group(entity_id)
        metadata = event.get("metadata", UNDEFINED)
        if kind == start_type:
            if not group.deltas:
                group.start = _carry_start_metadata(group.start, event)
            else:
                # A START replayed after deltas: its fields win, its metadata follows the
                # deltas it came after (upstream emits START ahead of the merged delta).
                group.start = _replace_start_fields(group.start, event)
                group.post_start_metadata = _merge_metadata(group.post_start_metadata, metadata)
        elif kind == end_type:
            group.end = event
            del groups[key]
            self._flush_group(group, entity_id, names)
        else:
            group.deltas.append(event)
            group.post_start_metadata = _merge_metadata(group.post_start_metadata, metadata)

    def _other(self, event: Any) -> None:
        for groups in (self.texts, self.tools):
            for group in groups.values():
                if group.start is not None and group.end is None:
                    group.others.append(event)
                    return
        self.out.append(event)

    def _flush_pending(self, *, close: bool) -> None:
        """Emit every buffered group: texts, then tool calls, each in arrival order.

        With ``close``, the groups that have a START are first closed as if their END had
        arrived (an END is synthesized); the START-less rest follows as at the end of input.
        """
        for groups, names in ((self.texts, _TEXT), (self.tools, _TOOL)):
            if close:
                for key, group in list(groups.items()):
                    if group.start is not None:
                        group.end = {"type": names[2]}
                        if group.id is not UNDEFINED:
                            group.end[names[3]] = group.id
                        del groups[key]
                        self._flush_group(group, group.id, names)
        for groups, names in ((self.texts, _TEXT), (self.tools, _TOOL)):
            pending = list(groups.values())
            groups.clear()
            for group in pending:
                self._flush_group(group, group.id, names)

    def _flush_group(self, group: _Group, entity_id: Any, names: tuple[str, ...]) -> None:
        if group.start is not None:
            self.out.append(group.start)
        if group.deltas:
            merged: dict[str, Any] = {"type": names[1]}
            if entity_id is not UNDEFINED:
                merged[names[3]] = entity_id
            # ``deltas.map((d) => d.delta).join("")``, which throws where String() of one
            # of them throws.
            deltas = [delta.get("delta", UNDEFINED) for delta in group.deltas]
            check_stringable(deltas)
            merged["delta"] = js_join(deltas, "")
            if group.post_start_metadata is not UNDEFINED:
                merged["metadata"] = group.post_start_metadata
            self.out.append(merged)
        if group.end is not None:
            self.out.append(group.end)
        self.out.extend(group.others)

    def _map_key(self, value: Any) -> Any:
        """The key a JS ``Map`` files ``value`` under (SameValueZero)."""
        if value is UNDEFINED or value is None or isinstance(value, (bool, str)):
            return (type(value).__name__, value)
        if isinstance(value, (int, float)):
            return ("number", as_double(value))
        # Objects are keyed by identity, and every parsed event holds its own objects.
        return ("object", next(self._object_ids))

    # -- state

    def _flush_state(self) -> None:
        window, self.state_window = self.state_window, []
        if not window:
            return
        last = max(
            (i for i, event in enumerate(window) if event.get("type") == "STATE_SNAPSHOT"),
            default=-1,
        )
        if last == -1:
            # Deltas alone are relative to a state this window never saw: keep them.
            self.out.extend(window)
            return
        state: Any = UNDEFINED
        for event in window[last:]:
            if event.get("type") == "STATE_SNAPSHOT":
                state = _clone_json(event.get("snapshot", UNDEFINED))
                continue
            try:
                state = apply_patch(state, event.get("delta", UNDEFINED))
            except PatchError as error:
                if self.warnings is not None:
                    self.warnings.append(
                        f"[ag-ui][compact] Failed to apply state patch while compacting: {error}"
                    )
        snapshot: dict[str, Any] = {"type": "STATE_SNAPSHOT"}
        if state is not UNDEFINED:
            snapshot["snapshot"] = state
        metadata: Any = UNDEFINED
        for event in window:
            metadata = _merge_metadata(metadata, event.get("metadata", UNDEFINED))
        if metadata is not UNDEFINED:
            snapshot["metadata"] = metadata
        self.out.append(snapshot)


def compact_events(
    events: list[dict[str, Any]],
    *,
    close_open: bool = False,
    warnings: list[str] | None = None,
) -> list[dict[str, Any]]:
    """Compact an AG-UI event stream exactly as ``compactEvents`` of ``@ag-ui/client`` 1.0.0.

    Args:
        events: the events, as decoded JSON objects; never modified.
        close_open: emit text messages and tool calls still open at a RUN_FINISHED or
            RUN_ERROR before that event (closing them before RUN_FINISHED), so that
            ``verifyEvents`` accepts the result (upstream issue #2813; see the module
            docstring). ``False`` reproduces upstream exactly.
        warnings: a list that receives one message per state patch skipped because it does
            not apply (upstream prints them with ``console.warn``).

    Returns:
        The compacted events. Passed-through events are the input objects themselves.

    Raises:
        InvalidEventError: where ``compactEvents`` throws: an event that is ``null``, or a
            delta that JS cannot turn into a string (an object with its own ``toString``).

    Example:
        >>> compact_events([
        ...     {"type": "TEXT_MESSAGE_START", "messageId": "m", "role": "assistant"},
        ...     {"type": "TEXT_MESSAGE_CONTENT", "messageId": "m", "delta": "Hel"},
        ...     {"type": "TEXT_MESSAGE_CONTENT", "messageId": "m", "delta": "lo"},
        ...     {"type": "TEXT_MESSAGE_END", "messageId": "m"},
        ... ])[1]
        {'type': 'TEXT_MESSAGE_CONTENT', 'messageId': 'm', 'delta': 'Hello'}
    """
    compactor = _Compactor(close_open=close_open, warnings=warnings)
    for index, event in enumerate(events):
        try:
            compactor.feed(index, event)
        except ToPrimitiveError as error:
            raise InvalidEventError(_no_string(error), index=index) from None
    try:
        return compactor.finish()
    except ToPrimitiveError as error:
        raise InvalidEventError(_no_string(error), index=len(events)) from None


# --------------------------------------------------------------------------- metadata


def _spread(value: Any) -> dict[str, Any]:
    """The own enumerable properties ``{...value}`` copies."""
    if isinstance(value, dict):
        return dict(value)
    if isinstance(value, list):
        return {str(i): item for i, item in enumerate(value)}
    if isinstance(value, str):
        return {str(i): unit for i, unit in enumerate(utf16_units(value))}
    return {}


def _merge_metadata(existing: Any, incoming: Any) -> Any:
    """``mergeMetadata`` of ``@ag-ui/core``: shallow, last write wins, a new object."""
    if incoming is UNDEFINED:
        return existing
    if existing is UNDEFINED:
        return _spread(incoming)
    return {**_spread(existing), **_spread(incoming)}


def _carry_start_metadata(previous: dict[str, Any] | None, start: dict[str, Any]) -> Any:
    if previous is None:
        return start
    metadata = _merge_metadata(
        previous.get("metadata", UNDEFINED), start.get("metadata", UNDEFINED)
    )
    return start if metadata is UNDEFINED else {**start, "metadata": metadata}


def _replace_start_fields(previous: dict[str, Any] | None, start: dict[str, Any]) -> Any:
    fields = {key: value for key, value in start.items() if key != "metadata"}
    carried = UNDEFINED if previous is None else previous.get("metadata", UNDEFINED)
    return fields if carried is UNDEFINED else {**fields, "metadata": carried}


# --------------------------------------------------------------------------- JS values


def _no_string(error: ToPrimitiveError) -> str:
    """The message of a delta JavaScript cannot turn into a string, naming the object."""
    shown = json.dumps(error.obj, ensure_ascii=False)[:80]
    return f"{error}: a delta object owns 'toString' ({shown})"


def _clone_json(value: Any) -> Any:
    if isinstance(value, dict):
        return {key: _clone_json(item) for key, item in value.items()}
    if isinstance(value, list):
        return [_clone_json(item) for item in value]
    return value
