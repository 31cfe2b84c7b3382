"""Reading a large SSE event that arrives in small pieces: does it cost in proportion to its size?

The ASGI Recorder and the HTTP recorders parse a response's ``text/event-stream`` as it
passes (``agui_store.codec.sse.SSEParser``), on the server's event loop. A large event (a
``STATE_SNAPSHOT``, a long message sent whole) reaches it in the server's chunks. A parser
that searched the whole unfinished line for its end at every chunk cost the square of the
event's size: a 4 MiB event in 4 KiB chunks took 19 s and held the loop for all of it.

Measured: one event of each size fed in 4 KiB and in 64 KiB chunks, against the same event
fed in one piece, in the same run. Ratios near 1 that stay flat as the event grows mean the
parser reads each byte a constant number of times.

    python -m benchmarks.bench_sse [--sizes 1,4,15] [--repeat 5]
"""

from __future__ import annotations

import argparse
import functools

import msgspec

from agui_store.codec.sse import SSEParser, encode_sse
from benchmarks._common import header, median_time


def event(mib: int) -> bytes:
    """One SSE event of about ``mib`` MiB: a ``TEXT_MESSAGE_CONTENT`` with a long delta."""
    payload = {"type": "TEXT_MESSAGE_CONTENT", "messageId": "m", "delta": "x" * (mib << 20)}
    return encode_sse(msgspec.json.encode(payload))


def fed(wire: bytes, step: int) -> None:
    parser = SSEParser()
    got = []
    for at in range(0, len(wire), step):
        got += parser.feed(wire[at : at + step])
    assert len(got) == 1


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", default="1,4,15", help="event sizes in MiB")
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    header("bench_sse: one large SSE event read in small pieces")
    print("| event | in one piece | in 64 KiB chunks | in 4 KiB chunks | 4 KiB / one piece |")
    print("|---|---|---|---|---|")
    for mib in (int(s) for s in args.sizes.split(",")):
        wire = event(mib)
        whole, large, small = (
            median_time(functools.partial(fed, wire, step), repeat=args.repeat)
            for step in (len(wire), 64 << 10, 4 << 10)
        )
        print(
            f"| {mib} MiB | {whole * 1e3:.1f} ms | {large * 1e3:.1f} ms | {small * 1e3:.1f} ms "
            f"| {small / whole:.2f}x |"
        )


if __name__ == "__main__":
    main()
