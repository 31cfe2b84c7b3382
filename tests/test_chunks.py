"""Checkpoint message lists as chunks (``agui_store.engine.checkpoints``): full chunks of ``CHUNK``
messages at fixed positions, listed by a manifest, and a tail of message blobs.

What the layout promises, each checked on a real file: a list that grows shares every full
chunk; an edit in place (a MESSAGES_SNAPSHOT, a late tool result) rewrites the chunks it
touches and no other (copy on write); branches share the chunks before their fork; a
checkpoint is read from its own rows (no other checkpoint but its state base); and
``check()`` names a chunk or list edited outside agui-store. That checkout from chunks
equals a full replay in general is the state machines of ``tests/contract/test_checkpoints.py``.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

import apsw
import pytest

import agui_store
from agui_store import testing
from agui_store.engine import checkpoints
from agui_store.history import blobs, hashing

CHUNK = checkpoints.CHUNK


def say(mid: str, text: str, role: str = "assistant") -> list[dict[str, Any]]:
    return [
        {"type": "TEXT_MESSAGE_START", "messageId": mid, "role": role},
        {"type": "TEXT_MESSAGE_CONTENT", "messageId": mid, "delta": text},
        {"type": "TEXT_MESSAGE_END", "messageId": mid},
    ]


def run(store: agui_store.Store, run_id: str, body: list[dict[str, Any]], **kw: Any) -> None:
    store.append(
        [
            {"type": "RUN_STARTED", "threadId": "t", "runId": run_id, **kw},
            *body,
            {"type": "RUN_FINISHED", "threadId": "t", "runId": run_id},
        ]
    )


def talk(store: agui_store.Store, run_id: str, n: int, **kw: Any) -> None:
    """A run that adds ``n`` messages."""
    run(store, run_id, [e for i in range(n) for e in say(f"{run_id}-{i}", f"{run_id} {i}")], **kw)


def layout(store: agui_store.Store, run_id: str) -> tuple[list[int], list[tuple[int, int]]]:
    """The run's checkpoint: its chunks' blob ids, and its tail's segments (blob id, count)."""
    conn = testing.connection(store)
    pk = conn.execute("SELECT id FROM runs WHERE run_id = ?", (run_id,)).fetchone()[0]
    with testing.reading(store) as tx:
        found = checkpoints.load(tx, pk).layout
    return found.chunk_ids, list(zip(found.tail_ids, found.tail_counts))


def replayed(store: agui_store.Store, run_id: str) -> list[Any]:
    conn = testing.connection(store)
    pk = conn.execute("SELECT id FROM runs WHERE run_id = ?", (run_id,)).fetchone()[0]
    return testing.replayed_view(store, pk).messages


@pytest.fixture
def store(tmp_path: Path) -> Any:
    with agui_store.open(tmp_path / "s.db") as s:
        yield s


def test_a_long_list_is_full_chunks_of_json_arrays_and_a_tail(store: agui_store.Store) -> None:
    talk(store, "r0", 2 * CHUNK + 5)
    chunks, tail = layout(store, "r0")
    assert len(chunks) == 2 and [count for _, count in tail] == [5]
    messages = store.checkout("r0").messages
    assert messages == replayed(store, "r0")
    conn = testing.connection(store)
    for k, chunk in enumerate(chunks):
        data = conn.execute("SELECT data FROM blobs WHERE id = ?", (chunk,)).fetchone()[0]
        assert json.loads(bytes(data)) == messages[k * CHUNK : (k + 1) * CHUNK]
    assert store.check().ok


def test_a_list_that_grows_shares_every_full_chunk_and_its_manifest(
    store: agui_store.Store,
) -> None:
    talk(store, "r0", CHUNK + 3)
    talk(store, "r1", 2)
    conn = testing.connection(store)
    manifests = conn.execute("SELECT chunks FROM checkpoints ORDER BY run").fetchall()
    assert manifests[0] == manifests[1] and manifests[0][0] is not None
    chunks0, tail0 = layout(store, "r0")
    chunks1, tail1 = layout(store, "r1")
    # The run's new messages are a segment of their own after the shared one.
    assert chunks1 == chunks0 and tail0 == tail1[:1] and [c for _, c in tail1] == [3, 2]
    # Filling the chunk writes one chunk and a manifest that extends the old one.
    talk(store, "r2", CHUNK - 5)
    chunks2, tail2 = layout(store, "r2")
    assert chunks2[:1] == chunks0 and len(chunks2) == 2 and tail2 == []
    assert store.checkout("r2").messages == replayed(store, "r2")


def test_a_snapshot_that_edits_an_early_message_rewrites_only_its_chunk(
    store: agui_store.Store,
) -> None:
    talk(store, "r0", 3 * CHUNK + 8)
    messages = store.checkout("r0").messages
    messages[3] = {**messages[3], "content": "edited"}
    run(store, "snap", [{"type": "MESSAGES_SNAPSHOT", "messages": messages}])
    before, tail_before = layout(store, "r0")
    after, tail_after = layout(store, "snap")
    assert after[0] != before[0] and after[1:] == before[1:]
    assert tail_after == tail_before  # the same messages: the same blobs
    assert store.checkout("snap").messages == messages == replayed(store, "snap")
    assert store.checkout("r0").messages[3]["content"] == "r0 3"
    assert store.check().ok


def test_a_late_tool_result_copies_on_write_from_where_it_lands(store: agui_store.Store) -> None:
    talk(store, "r0", 2 * CHUNK + 10)
    run(
        store,
        "call",
        [
            {"type": "TOOL_CALL_START", "toolCallId": "c1", "toolCallName": "f",
             "parentMessageId": "asks"},
            {"type": "TOOL_CALL_ARGS", "toolCallId": "c1", "delta": "{}"},
            {"type": "TOOL_CALL_END", "toolCallId": "c1"},
        ],
    )
    talk(store, "r1", CHUNK)  # the call's message now sits in the third chunk
    position = [m["id"] for m in store.checkout("r1").messages].index("asks")
    assert 2 * CHUNK <= position < 3 * CHUNK
    run(
        store,
        "late",
        [{"type": "TOOL_CALL_RESULT", "messageId": "res", "toolCallId": "c1", "content": "ok"}],
    )
    messages = store.checkout("late").messages
    assert messages[position + 1]["id"] == "res"  # inserted right after its call
    assert messages == replayed(store, "late")
    before, _ = layout(store, "r1")
    after, _ = layout(store, "late")
    assert after[:2] == before[:2]  # the chunks before the insert are shared
    assert after[2] != before[2]
    assert store.check().ok


def test_branches_share_the_chunks_before_their_fork(store: agui_store.Store) -> None:
    talk(store, "r0", 2 * CHUNK + 1)
    talk(store, "a1", 3)
    talk(store, "b1", 4, parentRunId="r0")
    talk(store, "b2", CHUNK)
    base, _ = layout(store, "r0")
    a, _ = layout(store, "a1")
    b, _ = layout(store, "b2")
    assert a == base and b[:2] == base and len(b) == 3
    for run_id in ("a1", "b1", "b2"):
        assert store.checkout(run_id).messages == replayed(store, run_id)


def test_a_checkpoint_reads_no_other_checkpoint_but_its_state_base(tmp_path: Path) -> None:
    path = tmp_path / "s.db"
    with agui_store.open(path) as store:
        for i in range(12):
            talk(store, f"r{i}", 17)
        expected = store.checkout("r11")
    conn = apsw.Connection(str(path))
    conn.execute(
        "DELETE FROM checkpoints WHERE run NOT IN (SELECT 12 UNION "
        "SELECT state_base FROM checkpoints WHERE run = 12 AND state_base IS NOT NULL)"
    )
    conn.close()
    with agui_store.open(path) as store:
        found = store.checkout("r11")
    assert (found.messages, found.state) == (expected.messages, expected.state)


def _edit(path: Path, sql: str) -> None:
    conn = apsw.Connection(str(path))
    conn.execute(sql)
    assert conn.changes() > 0
    conn.close()


def _problems(path: Path) -> list[str]:
    with agui_store.open(path) as store:
        return [str(p) for p in store.check().problems]


def test_check_names_a_chunk_edited_in_place_and_checkout_refuses_it(tmp_path: Path) -> None:
    path = tmp_path / "s.db"
    with agui_store.open(path) as store:
        talk(store, "r0", CHUNK + 1)
        (chunk,), _ = layout(store, "r0")
    _edit(
        path,
        f"UPDATE blobs SET data = CAST(replace(CAST(data AS TEXT), 'r0 5', 'r0 X') AS BLOB) "
        f"WHERE id = {chunk}",
    )
    found = _problems(path)
    assert any(p.startswith("blobs: blob ") and p.endswith("the blob is corrupt") for p in found)
    assert any("the checkpoint of run 'r0'" in p and "fails its hashes" in p for p in found)
    with agui_store.open(path) as store, pytest.raises(agui_store.HashMismatchError):
        store.checkout("r0")


def test_check_names_a_manifest_pointed_at_a_short_chunk(tmp_path: Path) -> None:
    path = tmp_path / "s.db"
    with agui_store.open(path) as store:
        talk(store, "r0", CHUNK + 2)
        talk(store, "r1", 1)
        _, tail = layout(store, "r1")
    # The manifest lists a tail segment where a chunk of 64 should be, its address forged.
    text = f"[{tail[0][0]}]".encode()
    _edit(
        path,
        f"UPDATE blobs SET data = CAST('{text.decode()}' AS BLOB), "
        f"hash = X'{hashlib.sha256(text).hexdigest()}' "
        "WHERE id = (SELECT chunks FROM checkpoints WHERE run = 1)",
    )
    found = _problems(path)
    assert (
        f"checkpoints: the checkpoint of run 'r0' (thread 't', #1): its chunk 0 (blob id "
        f"{tail[0][0]}) holds 2 messages, where a chunk holds {CHUNK}" in found
    ), found
    assert any(
        p.startswith("derived: the checkpoint of run 'r0' (thread 't', #1) cannot be read")
        for p in found
    ), found


def _rewrite_checkpoint(path: Path, run_id: str, *, drop_last_segment: bool = False) -> None:
    """Rewrite the checkpoint of ``run_id`` as a buggy writer would have: its first chunk
    holds an edited message (or, ``drop_last_segment``, its tail loses its last segment and
    its length says so), stored with true addresses, listed by a new manifest, and the
    checkpoint's view digest recomputed over them. Nothing but a comparison with a replay of
    the log can tell."""
    conn = apsw.Connection(str(path))
    pk, length, manifest, tail, state, base = conn.execute(
        "SELECT c.run, c.length, c.chunks, c.tail, c.state, c.state_base FROM checkpoints c "
        "JOIN runs r ON r.id = c.run WHERE r.run_id = ?",
        (run_id,),
    ).fetchone()

    def text_of(blob_id: int) -> bytes:
        row = conn.execute("SELECT codec, data FROM blobs WHERE id = ?", (blob_id,)).fetchone()
        return blobs.unpack(*row)

    def address(blob_id: int) -> bytes:
        return bytes(conn.execute("SELECT hash FROM blobs WHERE id = ?", (blob_id,)).fetchone()[0])

    def add(text: bytes) -> int:
        conn.execute(
            "INSERT INTO blobs(hash, codec, data) VALUES (?, ?, ?)",
            (blobs.digest(text), blobs.PLAIN, text),
        )
        return conn.last_insert_rowid()

    chunk_ids = json.loads(text_of(manifest))
    listed = json.loads(tail)
    if drop_last_segment:
        length -= listed.pop()[1]
    else:
        chunk_ids[0] = add(text_of(chunk_ids[0]).replace(b'"r0 5"', b'"r0 X"'))
        manifest = add(json.dumps(chunk_ids, separators=(",", ":")).encode())
    segments = [blob_id for blob_id, _ in listed]
    anchor = None
    if base is not None:
        (base_state,) = conn.execute("SELECT state FROM checkpoints WHERE run = ?", (base,))
        anchor = address(base_state[0])
    view = hashing.view_digest(
        hashing.messages_digest([address(i) for i in [*chunk_ids, *segments]]),
        address(state),
        anchor,
        None,
        None,
    )
    conn.execute(
        "UPDATE checkpoints SET chunks = ?, tail = ?, length = ?, view_hash = ? WHERE run = ?",
        (manifest, json.dumps(listed, separators=(",", ":")), length, view, pk),
    )
    # The list of tail segments kept in step, as the schema keeps it for a written checkpoint.
    conn.execute("DELETE FROM checkpoint_segments WHERE run = ?", (pk,))
    for blob_id in sorted(set(segments)):
        conn.execute("INSERT INTO checkpoint_segments(run, blob) VALUES (?, ?)", (pk, blob_id))
    conn.close()


def _chain_past_two_chunks(tmp_path: Path) -> Path:
    """A sound file: r0 says two full chunks and 3 messages, r1-r4 a message each."""
    path = tmp_path / "s.db"
    with agui_store.open(path) as store:
        talk(store, "r0", 2 * CHUNK + 3)
        for n in range(1, 5):
            talk(store, f"r{n}", 1)
        assert store.check().ok
    return path


def test_a_checkpoint_rewritten_whole_in_the_middle_of_a_chain_is_found_by_the_replay(
    tmp_path: Path,
) -> None:
    # check() compares a chain's checkpoints chunk by chunk only where they changed since the
    # last one found equal: a middle checkpoint whose early chunk was swapped for another
    # (content, address, manifest and digest all consistent) must still be compared.
    path = _chain_past_two_chunks(tmp_path)
    _rewrite_checkpoint(path, "r2")
    found = _problems(path)
    assert found == [
        "derived: the checkpoint of run 'r2' (thread 't', #3) differs from a replay of the log "
        "at message 5 (id 'r0-5')"
    ], found
    with agui_store.open(path) as store:
        assert store.checkout("r2").messages[5]["content"] == "r0 X"  # what a checkout serves
        assert store.checkout("r3").messages[5]["content"] == "r0 5"


def test_a_middle_checkpoint_short_of_its_last_message_is_named_with_whole_list_lengths(
    tmp_path: Path,
) -> None:
    # Its full chunks are the ones the check found equal at the run before, so only its tail
    # is compared: the lengths it names are still the whole lists'.
    path = _chain_past_two_chunks(tmp_path)
    _rewrite_checkpoint(path, "r2", drop_last_segment=True)
    found = _problems(path)
    whole = 2 * CHUNK + 5
    assert found == [
        f"derived: the checkpoint of run 'r2' (thread 't', #3) differs from a replay of the log "
        f"at {whole - 1} messages where the replay has {whole}"
    ], found


def test_a_tail_segment_of_long_messages_is_kept_compressed_and_reads_back(
    store: agui_store.Store,
) -> None:
    words = "the store keeps every event and restores any run as the client holds it "
    run(store, "r0", [e for i in range(4) for e in say(f"m{i}", words * (i + 8))])
    _, tail = layout(store, "r0")
    conn = testing.connection(store)
    (codec_value,) = conn.execute("SELECT codec FROM blobs WHERE id = ?", (tail[0][0],)).fetchone()
    assert codec_value == 1  # zlib
    assert store.checkout("r0").messages == replayed(store, "r0")
    assert store.check().ok


def test_a_diff_skips_the_chunks_both_sides_share_and_finds_what_a_full_compare_finds(
    store: agui_store.Store,
) -> None:
    from agui_store.history.diff import compare

    talk(store, "r0", 3 * CHUNK + 2)
    talk(store, "a1", 3)
    talk(store, "b1", 2, parentRunId="r0")
    messages = store.checkout("b1").messages
    messages[-1] = {**messages[-1], "content": "changed"}
    messages[CHUNK + 1] = {**messages[CHUNK + 1], "content": "edited"}
    run(store, "b2", [{"type": "MESSAGES_SNAPSHOT", "messages": messages}])
    for a, b in (("a1", "b2"), ("a1", "b1"), ("r0", "b2")):
        for mode in ("three-dot", "two-dot"):
            found = store.diff(a, b, mode=mode)
            view_a, view_b = store.checkout(a), store.checkout(b)
            if mode == "two-dot":
                expected = compare(view_a.messages, view_a.state, view_b.messages, view_b.state)
                assert found.changes == expected
            else:
                assert found.merge_base is not None
                base = store.checkout(found.merge_base.run_id)
                assert found.changes == compare(
                    base.messages, base.state, view_b.messages, view_b.state
                )
                assert found.a_changes == compare(
                    base.messages, base.state, view_a.messages, view_a.state
                )
    # What the comparisons above skipped: a1 and b2 share their first chunk (the edit is in
    # the second), a1 and b1 all three.
    assert layout(store, "a1")[0][:1] == layout(store, "b2")[0][:1]
    assert layout(store, "a1")[0][1] != layout(store, "b2")[0][1]
    assert layout(store, "a1")[0] == layout(store, "b1")[0]
