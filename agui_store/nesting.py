"""How deep a state may nest: the store refuses a patch that would build what it cannot read.

One event may nest ``max_depth`` levels (the event object is level 1), so a ``STATE_SNAPSHOT``
can set a state of ``max_depth - 1`` levels and no deeper. ``STATE_DELTA`` and
``ACTIVITY_DELTA`` patches could go on nesting one level per event, each event small and
shallow, until the state is thousands of levels deep: then every recursive reader fails
(``json.dumps`` near 1,000 levels, checkpoints, ``diff``) and so does the official client
(``@ag-ui/client`` 1.0.0 throws ``RangeError: Maximum call stack size exceeded`` between
1,000 and 2,000 levels, after seconds of quadratic work). So a patch may build no deeper
than a snapshot may carry: :func:`state_depth_limit` levels, for the state and for an activity
message's content alike.

Since every value in such a state sits, at JSON Pointer depth ``k``, no more than
``limit - k`` levels deep, only two kinds of operation can break the limit:

* ``add`` and ``replace`` write their ``value`` at their ``path``: the ``path``'s levels
  plus the value's are known from the event alone (:func:`refuse_deep_writes`), and are
  refused whether or not the patch would apply, like any event nested too deeply;
* ``copy`` and ``move`` to a path deeper than their ``from``: how deep the copied value is
  depends on the state, so the store replays the run to that event and asks
  :func:`deep_copy_at` (they are rare; every other operation needs no state).

Pure: no storage, no reducer.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from agui_store.errors import InvalidEventError
from agui_store.patch import UNDEFINED, PatchError, _value_at, apply_patch

__all__ = [
    "PATCH_FIELDS",
    "deep_copy_at",
    "deepening_copies",
    "depth_of",
    "pointer_depth",
    "refuse_deep_writes",
    "state_depth_limit",
]

#: The events whose patch builds nested values, and the field that holds it.
PATCH_FIELDS = {"STATE_DELTA": "delta", "ACTIVITY_DELTA": "patch"}

# Levels above an operation's value inside its event: the event, the patch list, the op.
_ABOVE_VALUE = 3


def state_depth_limit(max_depth: int) -> int:
    """The deepest state (or activity content) a patch may build: what a snapshot event
    nested ``max_depth`` levels can carry."""
    return max_depth - 1


def depth_of(value: Any) -> int:
    """Levels of nesting: 0 for a scalar, 1 for an empty or flat container. Iterative, so
    that no value is too deep to measure."""
    if not isinstance(value, (dict, list)):
        return 0
    deepest = 0
    stack = [(value, 1)]
    while stack:
        node, level = stack.pop()
        if isinstance(node, dict):
            children: Any = node.values()
        elif isinstance(node, list):
            children = node
        else:
            continue
        deepest = max(deepest, level)
        stack.extend((child, level + 1) for child in children if isinstance(child, (dict, list)))
    return deepest


def pointer_depth(pointer: Any) -> int:
    """How many levels a JSON Pointer goes down (``""``: 0, ``"/a/0"``: 2)."""
    return pointer.count("/") if isinstance(pointer, str) else 0


def _patch_of(event: dict[str, Any], kind: str) -> list[Any]:
    field = PATCH_FIELDS.get(kind)
    ops = event.get(field) if field is not None else None
    return ops if isinstance(ops, list) else []


def refuse_deep_writes(
    events: Sequence[dict[str, Any]],
    types: Sequence[str],
    max_depth: int,
    raws: Sequence[bytes] | None = None,
) -> None:
    """Refuse the first ``add``/``replace`` whose value would sit deeper than the limit.

    ``raws``, the events' JSON texts, when given, spare looking into events that cannot
    write deep enough.

    Raises:
        InvalidEventError: naming the event, its type and the operation's ``path``.
    """
    limit = state_depth_limit(max_depth)
    for index, (event, kind) in enumerate(zip(events, types)):
        if kind not in PATCH_FIELDS:
            continue
        if raws is not None:
            # A write nests no deeper than its path has slashes plus its value has brackets:
            # counting them in the event's text (C speed) clears almost every event.
            # A path may spell a slash "\u002f": an event with escapes is looked into.
            raw = raws[index]
            bound = raw.count(b"{") + raw.count(b"[") + raw.count(b"/") - _ABOVE_VALUE
            if bound <= limit and b"\\u" not in raw:
                continue
        for n, op in enumerate(_patch_of(event, kind)):
            if not isinstance(op, dict) or op.get("op") not in ("add", "replace"):
                continue
            levels = pointer_depth(op.get("path"))
            # The event passed max_depth: its value has at most max_depth - 3 levels.
            if levels + max_depth - _ABOVE_VALUE <= limit:
                continue
            total = levels + depth_of(op.get("value"))
            if total > limit:
                raise InvalidEventError(
                    f"writes a value {total} levels deep into the "
                    f"{'state' if kind == 'STATE_DELTA' else 'activity content'}; the store "
                    f"keeps at most {limit} (max_depth {max_depth} less the event's own level, "
                    "what a snapshot can carry), so that every reader can read it back",
                    index=index,
                    event_type=kind,
                    path=f"$.{PATCH_FIELDS[kind]}[{n}]",
                )


def deepening_copies(
    events: Sequence[dict[str, Any]], types: Sequence[str], raws: Sequence[bytes] | None = None
) -> list[int]:
    """Positions of the events with a ``copy`` or ``move`` to a deeper path than its
    ``from``: only those can nest a state deeper than their own text shows. ``raws`` (the
    events' JSON texts) spare looking into events that name neither."""
    found = []
    for index, (event, kind) in enumerate(zip(events, types)):
        if kind not in PATCH_FIELDS:
            continue
        raw = raws[index] if raws is not None else None
        if raw is not None and b'"copy"' not in raw and b'"move"' not in raw and b"\\u" not in raw:
            continue  # with an escape ("\u0063opy" is "copy") the event is looked into
        for op in _patch_of(event, kind):
            if (
                isinstance(op, dict)
                and op.get("op") in ("copy", "move")
                and pointer_depth(op.get("path")) > pointer_depth(op.get("from"))
            ):
                found.append(index)
                break
    return found


def deep_copy_at(document: Any, operations: list[Any], limit: int) -> tuple[int, int] | None:
    """Where a patch that applies copies or moves a value deeper than ``limit`` levels:
    ``(operation index, levels)``, or ``None`` (also when the patch fails: the client then
    keeps its state, which nests no deeper).

    The operations are applied one by one to see each copy land; ``document`` is untouched.
    """
    problem: tuple[int, int] | None = None
    current = document
    try:
        for n, op in enumerate(operations):
            current = apply_patch(current, [op])
            if problem is not None or current is UNDEFINED:
                continue
            if isinstance(op, dict) and op.get("op") in ("copy", "move"):
                levels = pointer_depth(op.get("path"))
                if levels > pointer_depth(op.get("from")):
                    total = levels + depth_of(_at(current, op["path"]))
                    if total > limit:
                        problem = (n, total)
    except PatchError:
        return None
    return problem


def _at(document: Any, pointer: str) -> Any:
    """The value a pointer names after a successful copy or move, read as the client reads
    it (fast-json-patch's ``getValueByPointer``)."""
    try:
        return _value_at(document, pointer)
    except Exception:  # an unreadable target holds nothing deeper
        return None
