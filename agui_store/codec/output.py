"""Writing events out: JSON, JSON Lines and SSE, streamed (docs/design/behaviour.md#interchange).
Pure: no storage.

Reading them back in is :func:`agui_store.codec.ingest.parse_events`, which takes all three, so a
round trip through any format gives back JSON-equal events.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Any

from agui_store.codec.ingest import encode
from agui_store.codec.sse import encode_sse

FORMATS = ("json", "jsonl", "sse")


def serialize(events: Iterable[Any], fmt: str = "jsonl") -> Iterator[bytes]:
    """Chunks of ``events`` in ``fmt``; join them or write them as they come.

    SSE is what an AG-UI server sends (``data: <json>`` then a blank line, as
    ``@ag-ui/encoder`` writes it: :func:`~agui_store.codec.sse.encode_sse`); the sequence
    number is not invented here.
    """
    if fmt not in FORMATS:
        raise ValueError(f"unknown format {fmt!r}: use one of {', '.join(FORMATS)}")
    if fmt == "json":
        yield b"["
        for i, event in enumerate(events):
            yield (b",\n" if i else b"\n") + encode(event)
        yield b"\n]\n"
    elif fmt == "jsonl":
        for event in events:
            yield encode(event) + b"\n"
    else:
        for event in events:
            yield encode_sse(encode(event))
