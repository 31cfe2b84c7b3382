"""Comparing two restored views (docs/design/comparison.md) — pure, no storage.

Messages are compared by id (added / removed / modified, with both versions); the state
change is an RFC 6902 patch made by ``jsonpatch`` that takes the old state to the new one.
``Store.diff`` finds the merge base and feeds the views in; the records it returns
(:class:`~agui_store.records.Diff`, ``ViewChange``, ``MessageChange``) are in
:mod:`agui_store.records`.
"""

from __future__ import annotations

from collections.abc import MutableMapping, MutableSequence
from typing import Any

import jsonpatch

from agui_store.protocol.js import json_equal
from agui_store.protocol.patch import PatchError, apply_patch
from agui_store.records import ChangeKind, Diff, MessageChange, ViewChange

# The records a comparison makes live with the other records; they are named here too, where
# they were first defined (``from agui_store.history.diff import Diff`` keeps working).
__all__ = [
    "ChangeKind",
    "Diff",
    "MessageChange",
    "ViewChange",
    "compare",
    "make_patch",
    "message_changes",
    "state_patch",
]

def _keyed(messages: list[dict[str, Any]]) -> dict[Any, dict[str, Any]]:
    """Messages by id; a repeated id is told apart by its occurrence (id, n)."""
    out: dict[Any, dict[str, Any]] = {}
    seen: dict[Any, int] = {}
    for position, message in enumerate(messages):
        mid = message.get("id") if isinstance(message, dict) else None
        if not isinstance(mid, str):
            mid = ("#", position)
        n = seen.get(mid, 0)
        seen[mid] = n + 1
        out[mid if n == 0 else (mid, n)] = message
    return out


def message_changes(old: list[dict[str, Any]], new: list[dict[str, Any]]) -> list[MessageChange]:
    """Changes keyed by message id, in the new view's order, removals last in the old order.

    A message counts as modified when its JSON differs (a reordering alone is not a change).
    """
    before, after = _keyed(old), _keyed(new)
    out: list[MessageChange] = []
    for key, message in after.items():
        previous = before.get(key)
        mid = key[0] if isinstance(key, tuple) and key[0] != "#" else message.get("id")
        if previous is None:
            out.append(MessageChange(mid, "added", None, message))
        elif not json_equal(previous, message):
            out.append(MessageChange(mid, "modified", previous, message))
    for key, message in before.items():
        if key not in after:
            mid = key[0] if isinstance(key, tuple) and key[0] != "#" else message.get("id")
            out.append(MessageChange(mid, "removed", message, None))
    return out


def state_patch(old: Any, new: Any) -> list[dict[str, Any]]:
    """An RFC 6902 patch taking ``old`` to ``new`` (empty when they are equal).

    ``jsonpatch`` makes it; the result is checked the way the official client would apply it
    (fast-json-patch semantics). ``jsonpatch`` sometimes moves a value into its own child,
    which RFC 6902 forbids and the client rejects: then a plain add/remove/replace patch is
    used instead.
    """
    if json_equal(old, new):
        return []
    if isinstance(old, (dict, list)) and isinstance(new, (dict, list)) and type(old) is type(new):
        ops = make_patch(old, new)
        try:
            if json_equal(apply_patch(old, ops), new):
                return ops
        except PatchError:
            pass
        return _plain_patch(old, new, "")
    return [{"op": "replace", "path": "", "value": new}]


def make_patch(old: Any, new: Any) -> list[dict[str, Any]]:
    """:func:`ordered_make_patch`, with the same operations, at the cost of
    where the two differ: a long list that only grew (a state's history, say) is not walked
    element by element through the start both share."""
    if not SKIPS_SHARED_LIST_STARTS:
        return ordered_make_patch(old, new)
    builder = _PrefixSkippingBuilder(
        old, new, jsonpatch.JsonPatch.json_dumper, pointer_cls=jsonpatch.JsonPointer
    )
    builder._compare_values("", None, old, new)
    return list(builder.execute())


def common_start(a: Any, b: Any, limit: int | None = None) -> int:
    """How many leading elements two lists share (``==``), at most ``limit``, found by
    halving with slice comparisons: in C, and each element compared about once."""
    shortest = min(len(a), len(b))
    limit = shortest if limit is None else min(shortest, limit)
    known = 0  # a[:known] == b[:known]; none past limit
    while known < limit:
        mid = (known + limit + 1) // 2
        if a[known:mid] == b[known:mid]:
            known = mid
        else:
            limit = mid - 1
    return known


class OrderedDiffBuilder(jsonpatch.DiffBuilder):  # type: ignore[misc]
    """jsonpatch's diff builder comparing an object's keys in sorted order (removed keys,
    then added ones, then the shared ones), where jsonpatch walks Python sets of them: its
    operations came out in an order that changed with ``PYTHONHASHSEED``, so ``diff --json``
    printed the same diff differently from one process to the next. Sorted, not in the
    objects' own order: two equal states may hold their keys in different orders (one
    replayed, one read from a checkpoint), and their diffs must not differ. Each key's
    operations are jsonpatch's."""

    def _compare_dicts(self, path: str, src: Any, dst: Any) -> None:
        for key in sorted(key for key in src if key not in dst):
            self._item_removed(path, str(key), src[key])
        for key in sorted(key for key in dst if key not in src):
            self._item_added(path, str(key), dst[key])
        for key in sorted(key for key in src if key in dst):
            self._compare_values(path, key, src[key], dst[key])


def ordered_make_patch(old: Any, new: Any) -> list[dict[str, Any]]:
    """``jsonpatch.make_patch(old, new).patch`` with objects' keys compared in sorted order
    (:class:`OrderedDiffBuilder`): the same operations whatever the hash seed."""
    builder = OrderedDiffBuilder(
        old, new, jsonpatch.JsonPatch.json_dumper, pointer_cls=jsonpatch.JsonPointer
    )
    builder._compare_values("", None, old, new)
    return list(builder.execute())


class _PrefixSkippingBuilder(OrderedDiffBuilder):
    """jsonpatch 1.33's diff builder, whose list comparison starts past the elements both
    lists share. Its own loop skips them one at a time in Python (``if old == new:
    continue``, no operation and no bookkeeping for them), so starting past them gives the
    same operations. (Slices compare identical elements as equal without calling ``==``:
    that differs only for NaN, which JSON does not have.)"""

    def _compare_lists(self, path: str, src: Any, dst: Any) -> None:
        len_src, len_dst = len(src), len(dst)
        max_len, min_len = max(len_src, len_dst), min(len_src, len_dst)
        start = common_start(src, dst) if min_len >= _PREFIX_WORTH_SKIPPING else 0
        # The rest is jsonpatch 1.33's DiffBuilder._compare_lists, from ``start``.
        for key in range(start, max_len):
            if key < min_len:
                old, new = src[key], dst[key]
                if old == new:
                    continue
                if isinstance(old, MutableMapping) and isinstance(new, MutableMapping):
                    self._compare_dicts(jsonpatch._path_join(path, key), old, new)
                elif isinstance(old, MutableSequence) and isinstance(new, MutableSequence):
                    self._compare_lists(jsonpatch._path_join(path, key), old, new)
                else:
                    self._item_removed(path, key, old)
                    self._item_added(path, key, new)
            elif len_src > len_dst:
                self._item_removed(path, len_dst, src[key])
            else:
                self._item_added(path, key, dst[key])


#: Lists shorter than this are compared as jsonpatch compares them (halving costs more).
_PREFIX_WORTH_SKIPPING = 32
#: Whether the installed jsonpatch is the one whose builder ``_PrefixSkippingBuilder``
#: extends (its list comparison is copied there); any other compares as it does.
SKIPS_SHARED_LIST_STARTS = getattr(jsonpatch, "__version__", "") == "1.33" and all(
    hasattr(jsonpatch.DiffBuilder, name)
    for name in ("_compare_values", "_compare_dicts", "_item_added", "_item_removed", "execute")
) and hasattr(jsonpatch, "_path_join")


def _pointer(path: str, key: str | int) -> str:
    return f"{path}/{str(key).replace('~', '~0').replace('/', '~1')}"


def _plain_patch(old: Any, new: Any, path: str) -> list[dict[str, Any]]:
    """Only add, remove and replace: always valid, never clever."""
    if json_equal(old, new):
        return []
    if isinstance(old, dict) and isinstance(new, dict):
        ops = [{"op": "remove", "path": _pointer(path, k)} for k in old if k not in new]
        for k, v in new.items():
            if k in old:
                ops += _plain_patch(old[k], v, _pointer(path, k))
            else:
                ops.append({"op": "add", "path": _pointer(path, k), "value": v})
        return ops
    if isinstance(old, list) and isinstance(new, list):
        ops = []
        for i in range(min(len(old), len(new))):
            ops += _plain_patch(old[i], new[i], _pointer(path, i))
        ops += [{"op": "add", "path": _pointer(path, "-"), "value": v} for v in new[len(old) :]]
        ops += [{"op": "remove", "path": _pointer(path, i)}
                for i in range(len(old) - 1, len(new) - 1, -1)]
        return ops
    return [{"op": "replace", "path": path, "value": new}]


def compare(
    old_messages: list[dict[str, Any]],
    old_state: Any,
    new_messages: list[dict[str, Any]],
    new_state: Any,
) -> ViewChange:
    return ViewChange(
        message_changes(old_messages, new_messages), state_patch(old_state, new_state)
    )
