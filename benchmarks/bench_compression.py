"""Blob compression: zlib (standard library) against the alternatives, on real message blobs.

Blobs are the canonical JSON of messages and states from the upstream recordings in
../shared/fixtures (restored through agui-store), plus the demo conversation. For each codec:
total size ratio, and decompression speed next to merely reading the plain bytes, since
checkout decompresses on its hot path.

    python -m benchmarks.bench_compression
"""

from __future__ import annotations

import bz2
import json
import lzma
import os
import zlib
from collections.abc import Callable
from pathlib import Path

import agui_store
from agui_store.cli.demo import record_demo
from agui_store.codec.ingest import canonical_bytes
from benchmarks._common import header, median_time

#: The upstream recordings: ``$AGUI_STORE_SHARED/fixtures``, as the tests read them.
SHARED = Path(
    os.environ.get("AGUI_STORE_SHARED", Path(__file__).resolve().parents[2] / "shared")
) / "fixtures"


def _views(store: agui_store.Store) -> list[bytes]:
    out: list[bytes] = []
    for thread in store.threads():
        for run in store.runs(thread):
            co = store.checkout(run.run_id, thread_id=thread)
            out += [canonical_bytes(m) for m in co.messages]
            out.append(canonical_bytes(co.state))
    return out


def sample_blobs() -> list[bytes]:
    out: list[bytes] = []
    with agui_store.open(":memory:") as store:
        record_demo(store)
        out += _views(store)
    for path in sorted(SHARED.glob("*/*.json")):
        data = json.loads(path.read_text())
        for events in data.values() if isinstance(data, dict) else [data]:
            with agui_store.open(":memory:") as store:
                store.append(events)
                out += _views(store)
    return list(dict.fromkeys(out))  # content addressing: each distinct blob once


def plain_copies(blobs: list[bytes]) -> list[bytearray]:
    """The baseline: every blob's bytes read into a new buffer. (``bytes(b)`` of a bytes
    object is the object itself, and would read nothing.)"""
    return [bytearray(b) for b in blobs]


def main() -> None:
    header("blob compression on real message and state blobs")
    blobs = sample_blobs()
    big = [b for b in blobs if len(b) >= 512]
    total = sum(len(b) for b in big)
    print(f"{len(blobs)} distinct blobs, {len(big)} of >= 512 bytes ({total / 1e3:.0f} kB)")
    codecs: dict[str, tuple[Callable[[bytes], bytes], Callable[[bytes], bytes]]] = {
        "zlib-1": (lambda b: zlib.compress(b, 1), zlib.decompress),
        "zlib-6 (chosen)": (lambda b: zlib.compress(b, 6), zlib.decompress),
        "zlib-9": (lambda b: zlib.compress(b, 9), zlib.decompress),
        "bz2-9": (lambda b: bz2.compress(b, 9), bz2.decompress),
        "lzma": (lzma.compress, lzma.decompress),
    }
    copy = median_time(lambda: plain_copies(big), repeat=20)
    print("| codec | size ratio | compress MB/s | decompress MB/s | decompress / plain copy |")
    print("|---|---|---|---|---|")
    for name, (comp, decomp) in codecs.items():
        packed = [comp(b) for b in big]
        c = median_time(lambda comp=comp: [comp(b) for b in big], repeat=3)
        d = median_time(lambda decomp=decomp, packed=packed: [decomp(p) for p in packed])
        ratio = sum(len(p) for p in packed) / total
        print(
            f"| {name} | {ratio:.2f} | {total / c / 1e6:.0f} | {total / d / 1e6:.0f} "
            f"| {d / copy:.0f}x |"
        )
    print(
        "zstd would need a new dependency (python-zstandard) until Python 3.14's compression.zstd;"
    )
    print("zlib is kept unless it loses clearly on size at similar speed.")


if __name__ == "__main__":
    main()
