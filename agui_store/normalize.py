"""Input normalization (SPEC §4): a run's input names the messages its lineage already holds
by reference instead of repeating them.

A client like ``HttpAgent`` sends the whole history with every run, so storing inputs as sent
grows a thread quadratically. Here an input's message list becomes a mix of ``[start, count]``
ranges into the lineage parent's view and literal messages; expanding it against that same
view gives back the list as sent. Pure: no storage.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from agui_store.codec import canonical_bytes

#: A normalized message list: ranges of the parent's view, and messages as sent.
Refs = list[Any]


def normalize(sent: Sequence[Any], base: Sequence[dict[str, Any]]) -> Refs | None:
    """``sent`` as references into ``base`` where a message is exactly the one at that place
    of ``base`` (same canonical JSON: key order aside, byte for byte, so ``1`` and ``1.0``
    differ); ``None`` when nothing is shared."""
    where: dict[Any, int] = {}
    for j, m in enumerate(base):
        mid = m.get("id") if isinstance(m, dict) else None
        if isinstance(mid, str):
            where.setdefault(mid, j)
    out: Refs = []
    shared = 0
    for m in sent:
        j = where.get(m.get("id")) if isinstance(m, dict) else None
        if j is not None and (base[j] is m or _same(base[j], m)):
            last = out[-1] if out else None
            if isinstance(last, list) and last[0] + last[1] == j:
                last[1] += 1
            else:
                out.append([j, 1])
            shared += 1
        else:
            out.append(m)
    return out if shared else None


def _same(a: Any, b: Any) -> bool:
    try:
        return a == b and canonical_bytes(a) == canonical_bytes(b)
    except ValueError:
        return False


def expand(refs: Refs, base: Sequence[dict[str, Any]]) -> list[Any]:
    """The message list ``refs`` stands for, against the same ``base`` it was made from.

    Referenced messages are ``base``'s own objects (the caller decides whether to copy).
    """
    out: list[Any] = []
    for item in refs:
        if isinstance(item, list):
            start, count = item
            if start < 0 or start + count > len(base):
                raise ValueError(
                    f"input reference [{start}, {count}] is outside the parent's view of "
                    f"{len(base)} messages"
                )
            out.extend(base[start : start + count])
        else:
            out.append(item)
    return out
