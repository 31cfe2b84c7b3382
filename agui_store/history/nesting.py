"""How deep and how fast a state may grow: the store refuses a patch that would build what it
cannot read back.

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
  :func:`copy_problem` (they are rare; every other operation needs no state).

Size has one such multiplier: a ``copy`` clones its value (the client's fast-json-patch
does too), so a copy of the root beside itself doubles the state, and a patch of a few dozen
such operations, a few hundred bytes long, asks for billions of values, which neither the
store nor the client could hold. An event may carry at most ``max_event_bytes`` of JSON, so
one event's copies may clone at most that much between them (:func:`copy_problem`, measured
before each copy is made): a patch then adds no more to the state than a snapshot could
hold, and the cost of an event stays in proportion to its own size.

Pure: no storage, no reducer.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, NamedTuple

from agui_store.codec.ingest import encode
from agui_store.errors import InvalidEventError
from agui_store.protocol.js import UNDEFINED
from agui_store.protocol.patch import PatchError, _value_at, apply_patch

__all__ = [
    "PATCH_FIELDS",
    "CopyProblem",
    "copy_problem",
    "depth_of",
    "pointer_depth",
    "refuse_deep_writes",
    "replayed_copies",
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


def replayed_copies(
    events: Sequence[dict[str, Any]], types: Sequence[str], raws: Sequence[bytes] | None = None
) -> list[int]:
    """Positions of the events :func:`copy_problem` must judge against the state: those with
    a ``copy`` (it clones: the state grows by what it copies) or a ``move`` to a deeper path
    than its ``from`` (it can nest the state deeper than its own text shows). ``raws`` (the
    events' JSON texts) spare looking into events that name neither."""
    found = []
    for index, (event, kind) in enumerate(zip(events, types)):
        if kind not in PATCH_FIELDS:
            continue
        raw = raws[index] if raws is not None else None
        if raw is not None and b'"copy"' not in raw and b'"move"' not in raw and b"\\u" not in raw:
            continue  # with an escape ("\u0063opy" is "copy") the event is looked into
        for op in _patch_of(event, kind):
            if isinstance(op, dict) and (
                op.get("op") == "copy"
                or (
                    op.get("op") == "move"
                    and pointer_depth(op.get("path")) > pointer_depth(op.get("from"))
                )
            ):
                found.append(index)
                break
    return found


class CopyProblem(NamedTuple):
    """What :func:`copy_problem` found: the operation at index ``op`` would nest the document
    ``levels`` deep (``cloned`` is 0), or bring what the patch clones to ``cloned`` bytes of
    JSON (``levels`` is 0)."""

    op: int
    levels: int
    cloned: int


def copy_problem(
    document: Any, operations: list[Any], depth_limit: int, clone_limit: int
) -> CopyProblem | None:
    """The first operation of a patch that copies or moves a value deeper than
    ``depth_limit`` levels (when the patch applies: else the client keeps its document,
    which nests no deeper), or whose copy brings the JSON the patch clones past
    ``clone_limit`` bytes (whether or not the patch would apply, as the client clones before
    it fails); ``None`` when there is neither.

    The operations are applied one by one to see each copy land; a copy is measured before
    it is made, so a patch that would clone too much is not cloned. ``document`` is
    untouched.
    """
    problem: CopyProblem | None = None
    current = document
    cloned = 0
    try:
        for n, op in enumerate(operations):
            source = op.get("from") if isinstance(op, dict) and op.get("op") == "copy" else None
            if isinstance(source, str) and current is not UNDEFINED:
                cloned += _json_size(_at(current, source))
                if cloned > clone_limit:
                    return CopyProblem(n, 0, cloned)
            current = apply_patch(current, [op])
            if problem is not None or current is UNDEFINED:
                continue
            if isinstance(op, dict) and op.get("op") in ("copy", "move"):
                levels = pointer_depth(op.get("path"))
                if levels > pointer_depth(op.get("from")):
                    total = levels + depth_of(_at(current, op["path"]))
                    if total > depth_limit:
                        problem = CopyProblem(n, total, 0)
    except PatchError:
        return None
    return problem


def _json_size(value: Any) -> int:
    """Bytes of a value's JSON text: what a copy of it clones (nothing for ``undefined``,
    which the client reads at a missing ``from`` of a patch that still applies)."""
    if value is UNDEFINED:
        return 0
    try:
        return len(encode(value))
    except Exception:  # an unreadable source clones nothing the client could write out
        return 0


def _at(document: Any, pointer: str) -> Any:
    """The value a pointer names after a successful copy or move, read as the client reads
    it (fast-json-patch's ``getValueByPointer``)."""
    try:
        return _value_at(document, pointer)
    except Exception:  # an unreadable target holds nothing deeper
        return None
