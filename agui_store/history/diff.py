"""Comparing two restored views (docs/design/behaviour.md#time-travel) — pure, no storage.

Messages are compared by id (added / removed / modified, with both versions); the state
change is an RFC 6902 patch that takes the old state to the new one, made here rather than by
a JSON Patch library: the operations, their order and the cost of a long list that only grew
are part of what ``diff`` promises, and no library's public API promises them.
``Store.diff`` finds the merge base and feeds the views in; the records it returns
(:class:`~agui_store.records.Diff`, ``ViewChange``, ``MessageChange``) are in
:mod:`agui_store.records`.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

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

    :func:`make_patch` makes it; the result is checked the way the official client would
    apply it (fast-json-patch semantics). Pairing equal values as moves can move a value into
    its own child, which RFC 6902 forbids and the client rejects, and Python's ``==`` takes
    ``1`` for ``true`` inside lists: then a plain add/remove/replace patch is used instead.
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
    """The RFC 6902 operations taking ``old`` to ``new``, found by :class:`_PatchBuilder`.

    Removed values that are added elsewhere become moves; a removal and an addition at one
    place become a replacement. Objects' keys are compared in sorted order, so the patch does
    not depend on the hash seed nor on the order in which two equal objects hold their keys.
    """
    builder = _PatchBuilder()
    if isinstance(old, dict) and isinstance(new, dict):
        builder.compare_dicts((), old, new)
    elif isinstance(old, list) and isinstance(new, list):
        builder.compare_lists((), old, new)
    elif not _same_json(old, new):
        return [{"op": "replace", "path": "", "value": new}]
    return builder.operations()


def common_start(a: Any, b: Any, limit: int | None = None) -> int:
    """How many leading elements two sequences (lists, texts) share (``==``), at most
    ``limit``, found by halving with slice comparisons: in C, and each element compared
    about once."""
    return _shared_length(a, b, limit, lambda low, high: a[low:high] == b[low:high])


def common_end(a: Any, b: Any, limit: int | None = None) -> int:
    """How many trailing elements two sequences share, at most ``limit``, found as
    :func:`common_start` finds the leading ones."""
    end_a, end_b = len(a), len(b)

    def same(low: int, high: int) -> bool:
        return bool(a[end_a - high : end_a - low] == b[end_b - high : end_b - low])

    return _shared_length(a, b, limit, same)


def _shared_length(a: Any, b: Any, limit: int | None, same: Callable[[int, int], bool]) -> int:
    """How many elements, at most ``limit``, two sequences share from one end:
    ``same(low, high)`` tells whether their elements ``low`` to ``high`` (counted from that
    end) are equal."""
    shortest = min(len(a), len(b))
    limit = shortest if limit is None else min(shortest, limit)
    known = 0  # the first `known` compare equal; none past limit
    while known < limit:
        mid = (known + limit + 1) // 2
        if same(known, mid):
            known = mid
        else:
            limit = mid - 1
    return known


#: Lists shorter than this are compared from their start (halving costs more).
_PREFIX_WORTH_SKIPPING = 32

_REMOVED, _ADDED = 0, 1


def _same_json(a: Any, b: Any) -> bool:
    """Whether two scalars serialize to the same JSON text: ``1``, ``1.0`` and ``true``
    differ, and so do ``0.0`` and ``-0.0``."""
    if type(a) is not type(b):
        return False
    if isinstance(a, float):
        return a == b and repr(a) == repr(b)
    return bool(a == b)


def _index(part: str) -> int | str:
    """A path part as a list index where ``int()`` reads it as one, else the part."""
    try:
        return int(part)
    except ValueError:
        return part


class _Operation:
    """One operation of a patch being built. ``parts`` is its path, unescaped; a move's
    ``source`` is where it takes its value from. ``in_list`` says an addition inserts into
    a list, so that pairing it with a later removal shifts the indices between them."""

    __slots__ = ("in_list", "kind", "parts", "source", "value")

    def __init__(
        self,
        kind: str,
        parts: list[str],
        value: Any = None,
        source: list[str] | None = None,
        in_list: bool = False,
    ) -> None:
        self.kind = kind
        self.parts = parts
        self.value = value
        self.source = source
        self.in_list = in_list

    @property
    def container(self) -> str:
        return "/".join(self.parts[:-1])

    @property
    def key(self) -> int | str:
        return _index(self.parts[-1])

    @key.setter
    def key(self, value: int) -> None:
        self.parts[-1] = str(value)

    def on_undo_remove(self, container: str, key: int) -> int:
        """Where index ``key`` of ``container`` stands once a removal there is taken back
        (it becomes a move), shifting this operation's own index where it must."""
        if self.kind == "replace":
            return key
        if self.kind == "move":
            assert self.source is not None
            source_key = _index(self.source[-1])
            if "/".join(self.source[:-1]) == container and isinstance(source_key, int):
                if source_key >= key:
                    self.source[-1] = str(source_key + 1)
                else:
                    key -= 1
        own = self.key
        if self.container == container and isinstance(own, int):
            # A removal at the restored index stands after it; an addition there, before.
            if (own >= key) if self.kind == "remove" else (own > key):
                self.key = own + 1
            elif self.kind == "remove":
                key -= 1
            else:
                key += 1
        return key

    def on_undo_add(self, container: str, key: int) -> int:
        """Where index ``key`` of ``container`` stands once an addition there is taken back
        (it becomes a move), shifting this operation's own index where it must."""
        if self.kind == "replace":
            return key
        if self.kind == "move":
            assert self.source is not None
            source_key = _index(self.source[-1])
            if "/".join(self.source[:-1]) == container and isinstance(source_key, int):
                if source_key > key:
                    self.source[-1] = str(source_key - 1)
                else:
                    key -= 1
        own = self.key
        if self.container == container and isinstance(own, int):
            if own > key:
                self.key = own - 1
            elif self.kind == "remove":
                key -= 1
            else:
                key += 1
        return key

    def as_json(self) -> dict[str, Any]:
        path = _pointer_of(self.parts)
        if self.kind == "remove":
            return {"op": "remove", "path": path}
        if self.kind == "move":
            assert self.source is not None
            return {"op": "move", "from": _pointer_of(self.source), "path": path}
        return {"op": self.kind, "path": path, "value": self.value}


def _pointer_of(parts: list[str]) -> str:
    return "".join("/" + part.replace("~", "~0").replace("/", "~1") for part in parts)


class _PatchBuilder:
    """Walks two JSON documents in step and collects the operations between them.

    The operations sit in a doubly linked list (``[previous, next, operation]`` nodes), so
    that a removal paired with a later addition of an equal value is replaced by a move in
    place, and the list indices of the operations recorded between the two are shifted to
    match. Values waiting to be paired are kept by ``(value, type)``, in a dict where the
    value hashes and in a list where it does not (objects and arrays).
    """

    def __init__(self) -> None:
        self.root: list[Any] = []
        self.root[:] = [self.root, self.root, None]
        self.waiting: tuple[dict[Any, list[Any]], dict[Any, list[Any]]] = ({}, {})
        self.waiting_unhashable: tuple[list[Any], list[Any]] = ([], [])

    # The linked list of operations.

    def insert(self, operation: _Operation) -> list[Any]:
        root = self.root
        last = root[0]
        last[1] = root[0] = [last, root, operation]
        return root[0]  # type: ignore[no-any-return]

    def unlink(self, node: list[Any]) -> None:
        previous, following, _ = node
        previous[1] = following
        following[0] = previous
        node[:] = []

    def after(self, node: list[Any]) -> Any:
        root, current = self.root, node[1]
        while current is not root:
            yield current[2]
            current = current[1]

    # Values waiting for their other half of a move.

    def keep(self, value: Any, node: list[Any], side: int) -> None:
        typed = (value, type(value))
        try:
            self.waiting[side].setdefault(typed, []).append(node)
        except TypeError:
            self.waiting_unhashable[side].append((typed, node))

    def take(self, value: Any, side: int) -> list[Any] | None:
        typed = (value, type(value))
        try:
            nodes = self.waiting[side].get(typed)
        except TypeError:
            pending = self.waiting_unhashable[side]
            for i in range(len(pending) - 1, -1, -1):
                if pending[i][0] == typed:
                    return pending.pop(i)[1]  # type: ignore[no-any-return]
            return None
        return nodes.pop() if nodes else None

    # The comparison.

    def added(self, path: tuple[str, ...], key: int | str, item: Any, in_list: bool) -> None:
        parts = [*path, str(key)]
        node = self.take(item, _REMOVED)
        if node is None:
            self.keep(item, self.insert(_Operation("add", parts, item, in_list=in_list)), _ADDED)
            return
        removal: _Operation = node[2]
        if isinstance(removal.key, int) and isinstance(key, int):
            for operation in self.after(node):
                removal.key = operation.on_undo_remove(removal.container, removal.key)
        self.unlink(node)
        if removal.parts != parts:
            self.insert(_Operation("move", parts, source=removal.parts))

    def removed(self, path: tuple[str, ...], key: int | str, item: Any) -> None:
        removal = _Operation("remove", [*path, str(key)])
        node = self.take(item, _ADDED)
        new_node = self.insert(removal)
        if node is None:
            self.keep(item, new_node, _REMOVED)
            return
        addition: _Operation = node[2]
        if addition.in_list:
            for operation in self.after(node):
                addition.key = operation.on_undo_add(addition.container, addition.key)
        self.unlink(node)
        if removal.parts != addition.parts:
            new_node[2] = _Operation("move", addition.parts, source=removal.parts)
        else:
            self.unlink(new_node)

    def compare_dicts(
        self, path: tuple[str, ...], src: dict[str, Any], dst: dict[str, Any]
    ) -> None:
        for key in sorted(key for key in src if key not in dst):
            self.removed(path, key, src[key])
        for key in sorted(key for key in dst if key not in src):
            self.added(path, key, dst[key], False)
        for key in sorted(key for key in src if key in dst):
            self.compare_values((*path, key), src[key], dst[key])

    def compare_lists(self, path: tuple[str, ...], src: list[Any], dst: list[Any]) -> None:
        len_src, len_dst = len(src), len(dst)
        shortest = min(len_src, len_dst)
        # Equal elements make no operation, so a long shared start is skipped whole: a list
        # that only grew costs what it grew by, not its length.
        start = common_start(src, dst) if shortest >= _PREFIX_WORTH_SKIPPING else 0
        for key in range(start, max(len_src, len_dst)):
            if key < shortest:
                old, new = src[key], dst[key]
                if old == new:
                    continue
                if isinstance(old, dict) and isinstance(new, dict):
                    self.compare_dicts((*path, str(key)), old, new)
                elif isinstance(old, list) and isinstance(new, list):
                    self.compare_lists((*path, str(key)), old, new)
                else:
                    self.removed(path, key, old)
                    self.added(path, key, new, True)
            elif len_src > len_dst:
                self.removed(path, len_dst, src[key])
            else:
                self.added(path, key, dst[key], True)

    def compare_values(self, parts: tuple[str, ...], src: Any, dst: Any) -> None:
        if isinstance(src, dict) and isinstance(dst, dict):
            self.compare_dicts(parts, src, dst)
        elif isinstance(src, list) and isinstance(dst, list):
            self.compare_lists(parts, src, dst)
        elif isinstance(src, (dict, list)) or isinstance(dst, (dict, list)) or not _same_json(
            src, dst
        ):
            self.insert(_Operation("replace", list(parts), dst))

    def operations(self) -> list[dict[str, Any]]:
        """The patch, with each removal directly followed by an addition at the same place
        written as one replacement."""
        out: list[dict[str, Any]] = []
        root, current = self.root, self.root[1]
        while current is not root:
            operation, following = current[2], current[1]
            if (
                following is not root
                and operation.kind == "remove"
                and following[2].kind == "add"
                and operation.parts == following[2].parts
            ):
                out.append(_Operation("replace", operation.parts, following[2].value).as_json())
                current = following[1]
                continue
            out.append(operation.as_json())
            current = following
        return out


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
    """The messages changed by id and the state patch from one view to another."""
    return ViewChange(
        message_changes(old_messages, new_messages), state_patch(old_state, new_state)
    )
