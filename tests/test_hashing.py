"""The batch digest ``append`` computes from the bytes it holds is the one ``check()``
recomputes from the stored rows (:func:`agui_store.history.hashing.batch_digest`), and the
lineage digest of message ids is the one stored digests were made with
(:func:`agui_store.history.lineage.hash_ids`)."""

from __future__ import annotations

import hashlib
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from agui_store.codec import ingest
from agui_store.history import hashing, lineage

KINDS = st.sampled_from(["RUN_STARTED", "TEXT_MESSAGE_CONTENT", "CUSTOM", "É_made_up", ""])
EVENTS = st.lists(st.tuples(KINDS, st.text(), st.one_of(st.none(), st.text())), max_size=12)


@given(
    first_seq=st.integers(min_value=1, max_value=2**62),
    events=EVENTS,
    outcome=st.one_of(st.none(), st.sampled_from(["success", "error", "interrupt"])),
    appended_at=st.integers(min_value=-(2**63), max_value=2**63 - 1),
)
def test_the_digest_of_held_bytes_equals_the_digest_of_the_stored_rows(
    first_seq: int,
    events: list[tuple[str, str, str | None]],
    outcome: str | None,
    appended_at: int,
) -> None:
    rows = [
        (first_seq + i, kind, text, refs) for i, (kind, text, refs) in enumerate(events)
    ]
    refs = {seq: r for seq, _, _, r in rows if r is not None}
    held = hashing.batch_digest_of(
        first_seq,
        [kind for kind, _, _ in events],
        [text.encode("utf-8") for _, text, _ in events],
        refs,
        outcome,
        appended_at,
    )
    assert held == hashing.batch_digest(rows, outcome, appended_at)


def test_a_batch_digest_covers_each_events_position_type_and_bytes_but_not_its_seq() -> None:
    base = hashing.batch_digest_of(7, ["CUSTOM", "RAW"], [b"{}", b"[]"], {}, None, 0)
    # Another store numbers the same events otherwise: the digest is the same.
    assert base == hashing.batch_digest_of(8, ["CUSTOM", "RAW"], [b"{}", b"[]"], {}, None, 0)
    assert base == hashing.batch_digest([(1, "CUSTOM", "{}", None), (90, "RAW", "[]", None)],
                                        None, 0)  # fmt: skip
    assert base != hashing.batch_digest_of(7, ["CUSTOM"], [b"{}"], {}, None, 0)
    # The echo references travel with the event at their position, whatever its seq.
    echoed = hashing.batch_digest_of(7, ["CUSTOM", "RAW"], [b"{}", b"[]"], {8: "x"}, None, 0)
    assert echoed == hashing.batch_digest_of(
        70, ["CUSTOM", "RAW"], [b"{}", b"[]"], {71: "x"}, None, 0
    )
    assert echoed != hashing.batch_digest_of(
        7, ["CUSTOM", "RAW"], [b"{}", b"[]"], {7: "x"}, None, 0
    )
    assert base != hashing.batch_digest_of(7, ["RAW", "CUSTOM"], [b"{}", b"[]"], {}, None, 0)
    assert base != hashing.batch_digest_of(7, ["CUSTOM", "RAW"], [b"[]", b"{}"], {}, None, 0)
    assert base != hashing.batch_digest_of(7, ["CUSTOM", "RAW"], [b"{}", b"[]"], {8: ""}, None, 0)


@given(st.lists(st.one_of(st.text(), st.integers(-(2**53), 2**53), st.none(), st.booleans())))
def test_the_lineage_digest_of_ids_is_the_one_fed_an_id_at_a_time(ids: list[Any]) -> None:
    # hash_ids encodes the ids as one array in C; stored digests were made one id at a time
    # (and lone surrogates, which msgspec refuses, still go that way).
    one_by_one = hashlib.sha256()
    for mid in ids:
        one_by_one.update(ingest.canonical_bytes(mid) + b"\x00")
    assert lineage.hash_ids(ids).digest() == one_by_one.digest()

