"""The archive (``Store.export_archive``, ``Store.import_archive``): everything that goes in
comes out. An archive imported into an empty store gives back the same store, importing it
again adds nothing, its export is the same bytes, and what ``copy`` refuses it refuses."""

from __future__ import annotations

import asyncio
import io
import os
import re
import tempfile
from pathlib import Path
from typing import Any

import msgspec
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import agui_store
from agui_store.errors import HashMismatchError, InvalidArgumentError, SyncConflictError
from tests.backends import checked, dump
from tests.conftest import FIXTURE_STREAMS, fixture_params
from tests.contract.test_restore import run_bounds
from tests.test_sync import conversations_of, everything, histories, play, record_run

#: The conversations the tests save, by id ("t1" and "t2" name threads: linked to them).
CONVERSATIONS = ["t1", "t2", "solo"]


def save_conversations(location: str, plan: list[tuple[str, int, bool]]) -> None:
    """Save ``(conversation, turns, leave a branch)`` as pydantic-ai's adapter would."""
    from pydantic_ai.conversation import Conversation

    from agui_store.integrations.pydantic_ai import ConversationStore
    from tests.pydantic_ai_conversations import turn

    async def save() -> None:
        async with ConversationStore(location) as store:
            for cid, turns, branch in plan:
                messages = [m for n in range(turns) for m in turn(n)]
                await store.save(Conversation(conversation_id=cid, messages=messages))
                if branch:
                    found = await store.load(cid)
                    assert found is not None
                    moved = await store.branch(cid, at=1, expected_revision=found.revision)
                    moved.messages.extend(turn(99))
                    await store.save(moved)

    asyncio.run(save())


def exported(store: agui_store.Store, **options: Any) -> bytes:
    out = io.BytesIO()
    store.export_archive(out, **options)
    return out.getvalue()


def assert_same_store(a: str, b: str) -> None:
    """Every public read, every content hash and every conversation equal; ``b`` sound."""
    with agui_store.open(a) as x, agui_store.open(b) as y:
        assert everything(x) == everything(y)
        assert checked(y)
    assert conversations_of(a, CONVERSATIONS) == conversations_of(b, CONVERSATIONS)


def round_trip(source: str, target: str) -> bytes:
    """Export ``source`` whole, import it into ``target``; the archive."""
    with agui_store.open(source) as store:
        archive = exported(store)
    with agui_store.open(target) as store:
        added = store.import_archive(io.BytesIO(archive))
        assert added.threads == len(store.threads())
        again = store.import_archive(io.BytesIO(archive))
        assert again == agui_store.ArchiveResult()
        assert exported(store) == archive
    return archive


@settings(
    deadline=None,
    max_examples=10,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(
    steps=histories(),
    interrupted=st.booleans(),
    talks=st.lists(
        st.tuples(st.sampled_from(CONVERSATIONS), st.integers(1, 3), st.booleans()),
        max_size=3,
        unique_by=lambda talk: talk[0],
    ),
)
@pytest.mark.pydantic_ai
def test_any_store_exported_and_imported_into_an_empty_store_is_the_same_store(
    new_location: Any,
    steps: list[tuple[Any, ...]],
    interrupted: bool,
    talks: list[tuple[str, int, bool]],
) -> None:
    source, target = new_location(), new_location()
    with agui_store.open(source) as store:
        play(store, steps, lambda: None)
        if interrupted:
            store.append(
                [
                    {"type": "RUN_STARTED", "threadId": "t3", "runId": "i1"},
                    {"type": "RUN_FINISHED", "threadId": "t3", "runId": "i1", "outcome": {
                        "type": "interrupt", "interrupts": [{"id": "x", "reason": "ok?"}]}},
                ],
                scope="bob",
            )  # fmt: skip
    save_conversations(source, talks)
    round_trip(source, target)
    assert_same_store(source, target)


@pytest.mark.pydantic_ai
def test_a_store_copied_to_this_backend_exported_and_imported_into_sqlite_is_the_same(
    new_location: Any, tmp_path: Path
) -> None:
    original, here, back = str(tmp_path / "original.db"), new_location(), str(tmp_path / "b.db")
    with agui_store.open(original) as store:
        play(store, [("run", "t1", "r1", None, True, False, "b1", 2, False),
                     ("interleaved", "t2", "r2", None),
                     ("run", "t2", "r3", "r2a", True, True, None, 1, False),
                     ("run", "t1", "r4", "r1", False, True, "b2", 3, False),
                     ("error", "t1")], lambda: None)  # fmt: skip
    save_conversations(original, [("t1", 2, True), ("t2", 1, False)])
    assert agui_store.copy(original, here).conversations == 2
    archive = Path(tmp_path / "here.jsonl")
    with agui_store.open(here) as store:
        store.export_archive(archive)
    with agui_store.open(back) as store:
        store.import_archive(archive)
    assert_same_store(original, back)


def _search_hits(store: agui_store.Store, words: list[str]) -> list[Any]:
    """Every hit of each word, for every owner; a cursor is each store's own."""
    return [
        [{k: v for k, v in hit.to_json().items() if k != "cursor"}
         for hit in store.search(word, scope=scope)]
        for word in words for scope in (None, "alice", "carol", "eve")
    ]  # fmt: skip


@pytest.mark.pydantic_ai
def test_a_store_holding_everything_and_erasures_goes_to_this_backend_and_back_the_same(
    new_location: Any, tmp_path: Path
) -> None:
    from tests.streams import run, say

    original = str(tmp_path / "original.db")
    with agui_store.open(original) as store:
        steps = [("run", "t1", "r1", None, True, False, "b1", 2, False),
                 ("run", "t2", "r3", None, True, True, None, 1, False),
                 ("run", "t1", "r4", "r1", False, True, "b2", 3, False)]  # fmt: skip
        play(store, steps, lambda: None)
        for n, (_, events) in enumerate(FIXTURE_STREAMS[:3]):
            store.append([{**e, "threadId": f"fx{n}"} if "threadId" in e else e
                          for e in events], scope="carol" if n % 2 else None)  # fmt: skip
        odd = "é🎉\u202e" * 100_000 + " zebrafish \ud83d"
        store.append(run("u1", "u1r", *say("u1m", odd, "assistant")), scope="carol")
        store.append(run("gone", "g1", *say("gm", "secretword", "assistant")))
        store.append(run("e1", "e1r", *say("em", "evesecret", "assistant")), scope="eve")
    save_conversations(original, [("t1", 2, True), ("t2", 1, False), ("solo", 2, True)])
    with agui_store.open(original) as store:
        before_erasure = exported(store)
        store.delete_thread("gone")
        store.delete_owner("eve")
    here, back, imported = new_location(), str(tmp_path / "back.db"), new_location()
    agui_store.copy(original, here)
    agui_store.copy(here, back)
    with agui_store.open(here) as store:
        archive = exported(store)
    with agui_store.open(imported) as store:
        store.import_archive(io.BytesIO(archive))
    assert b"secretword" not in archive and b"evesecret" not in archive
    words = ["zebrafish", "secretword", "evesecret", "hello"]
    with agui_store.open(original) as store:
        expected = everything(store), _search_hits(store, words)
    for location in (here, back, imported):
        with agui_store.open(location) as store:
            assert (everything(store), _search_hits(store, words)) == expected
            assert checked(store)
        assert conversations_of(location, CONVERSATIONS) == conversations_of(
            original, CONVERSATIONS
        )
    # A backup made before the erasures brings back nothing they erased, where the store
    # erased them and where a copy carried the erasures to.
    stale = new_location()
    with agui_store.open(stale) as store:
        store.import_archive(io.BytesIO(before_erasure))
    agui_store.copy(original, stale)
    for location in (original, stale):
        with agui_store.open(location) as store:
            if location == original:
                assert store.import_archive(io.BytesIO(before_erasure)).left_erased == 2
            assert "gone" not in store.threads() and "e1" not in store.threads(scope="eve")
            assert _search_hits(store, ["secretword", "evesecret"]) == [[]] * 8
            assert checked(store)


@pytest.mark.pydantic_ai
def test_a_thread_holding_half_an_emoji_comes_back_the_same_and_every_line_reads_as_json(
    new_location: Any,
) -> None:
    # JavaScript producers split an emoji into two escaped surrogates; an event, an input
    # or a message may hold one, which msgspec (and so the archive's reader) refuses.
    source, target = new_location(), new_location()
    half, whole = "\ud83d", "\ud83d\ude00"
    with agui_store.open(source) as store:
        store.append(
            [
                {"type": "RUN_STARTED", "threadId": "t", "runId": "r1"},
                {"type": "TEXT_MESSAGE_START", "messageId": "a1", "role": "assistant"},
                {"type": "TEXT_MESSAGE_CONTENT", "messageId": "a1", "delta": f"split {half}"},
                {"type": "TEXT_MESSAGE_CONTENT", "messageId": "a1", "delta": f" {whole}"},
                {"type": "TEXT_MESSAGE_END", "messageId": "a1"},
                {"type": "RUN_FINISHED", "threadId": "t", "runId": "r1"},
            ],
            input={"threadId": "t", "runId": "r1", "tools": [], "context": [],
                   "messages": [{"id": "u1", "role": "user", "content": f"hi {half}"}]},
        )  # fmt: skip
    archive = round_trip(source, target)
    for line in archive.splitlines():
        msgspec.json.decode(line)
    assert_same_store(source, target)
    with agui_store.open(target) as store:
        restored = store.checkout("r1", thread_id="t").messages[-1]["content"]
        assert restored == f"split {half} \U0001f600"


@pytest.mark.parametrize("events", [pytest.param(None, id="every-recording")]
                         if FIXTURE_STREAMS else fixture_params())  # fmt: skip
def test_every_upstream_recording_with_its_inputs_comes_back_the_same(
    new_location: Any, events: Any
) -> None:
    for _name, stream in FIXTURE_STREAMS:  # their ids repeat: a store each
        source, target = new_location(), new_location()
        with agui_store.open(source) as store:
            for a, b in run_bounds(stream):
                tid, rid = stream[a]["threadId"], stream[a]["runId"]
                store.append(stream[a:b], input={
                    "threadId": tid, "runId": rid, "state": {}, "tools": [], "context": [],
                    "messages": [{"id": f"{rid}-ask", "role": "user", "content": "go on"}],
                    "forwardedProps": {},
                })  # fmt: skip
        round_trip(source, target)
        with agui_store.open(source) as a, agui_store.open(target) as b:
            for tid in a.threads():
                for run in a.runs(tid):
                    rid = run.run_id
                    assert b.get_run(rid, thread_id=tid) == run
                    assert b.input(rid, thread_id=tid) == a.input(rid, thread_id=tid) is not None
                    assert b.events(rid, thread_id=tid) == a.events(rid, thread_id=tid)
            assert checked(b)


def test_a_run_the_store_holds_with_other_content_is_refused_and_nothing_is_written(
    new_location: Any,
) -> None:
    source, target = new_location(), new_location()
    with agui_store.open(source) as store:
        record_run(store, "t1", "r1", with_input=True)
        record_run(store, "t2", "q1")
        archive = exported(store)
    with agui_store.open(target) as store:
        record_run(store, "t2", "q1", with_input=True)  # q1 with an input: another run
    before = dump(target)
    with agui_store.open(target) as store, pytest.raises(SyncConflictError) as refused:
        store.import_archive(io.BytesIO(archive))
    assert refused.value.run_id == "q1" and "input" in str(refused.value)
    assert "nothing was written" in str(refused.value)
    assert "copied" not in str(refused.value)  # an import is not a copy
    assert dump(target) == before


def test_a_diverged_branch_is_refused_without_advice_to_force_what_an_import_cannot(
    new_location: Any,
) -> None:
    source, target = new_location(), new_location()
    with agui_store.open(source) as store:
        record_run(store, "t1", "r1")
        record_run(store, "t1", "r2", parent="r1")
        record_run(store, "t1", "r3", parent="r1")
        store.branch("idea", "r2", thread_id="t1")
        archive = exported(store)
    with agui_store.open(target) as store:
        store.import_archive(io.BytesIO(archive))
        store.branch("idea", "r3", thread_id="t1")  # moved: diverged from the archive
    before = dump(target)
    with agui_store.open(target) as store, pytest.raises(SyncConflictError) as refused:
        store.import_archive(io.BytesIO(archive))
    said = str(refused.value)
    assert refused.value.branch == "idea" and "not a fast-forward" in said, said
    assert "force" not in said  # an import has no force: its advice names what it has
    assert dump(target) == before


def test_an_edited_or_cut_archive_is_refused_by_line_and_nothing_is_written(
    new_location: Any,
) -> None:
    source, target = new_location(), new_location()
    with agui_store.open(source) as store:
        record_run(store, "t1", "r1", with_input=True)
        record_run(store, "t1", "r2", parent="r1", with_input=True)
        store.branch("b", "r1", thread_id="t1")
        archive = exported(store)
    lines = archive.splitlines(keepends=True)
    edited = archive.replace(b'"delta":"answer r2"', b'"delta":"answer r9"')
    branch = next(n for n, line in enumerate(lines) if line.startswith(b'{"record":"branch"'))
    cases: list[tuple[bytes, type[Exception], str]] = [
        (edited, HashMismatchError, "run 'r2' of thread 't1'"),
        (b"".join(lines[:-1]), InvalidArgumentError, "before its end record"),
        (b"".join(lines[:5] + lines[6:]), InvalidArgumentError, "line"),
        (lines[0].replace(b'"version":1', b'"version":99'), agui_store.SchemaVersionError,
         "newer agui-store"),
        (b'{"record":"thread"}\n', InvalidArgumentError, "not an agui-store archive"),
        (b"".join(lines[:branch] + lines[branch + 1 :]), InvalidArgumentError,
         "lines are missing"),
        (b"".join(lines[: branch + 1] + lines[branch:]), InvalidArgumentError,
         "lines were repeated or added"),
        (archive.replace(b'"run_id":"r1","updated_at"', b'"run_id":"nope","updated_at"'),
         InvalidArgumentError, f"line {branch + 1}: branch 'b' points at run 'nope'"),
        (archive.replace(b'"name":"b"', b'"name":"HEAD"'), InvalidArgumentError,
         f"line {branch + 1}: 'HEAD' is reserved"),
        (edited.replace(b"answer r9", b"answer \xff"),
         InvalidArgumentError, "line .*: not UTF-8 text"),
    ]  # fmt: skip
    before = dump(target)
    with agui_store.open(target) as store:
        for text, error, words in cases:
            with pytest.raises(error, match=words):
                store.import_archive(io.BytesIO(text))
        # The edit is named by the lines that hold it, and the archive blamed, not the store.
        changed = next(n for n, line in enumerate(lines, 1) if b'"answer r2"' in line)
        with pytest.raises(HashMismatchError) as refused:
            store.import_archive(io.BytesIO(edited))
        low, high = map(int, re.search(r"on lines (\d+)-(\d+)", str(refused.value)).groups())
        assert low <= changed <= high and "nothing was imported" in str(refused.value)
    assert dump(target) == before


def concatenated(*archives: bytes) -> bytes:
    """The archives' records end to end under one header, their end records' counts summed:
    a file that holds what its end record counts."""
    bodies = [archive.splitlines(keepends=True) for archive in archives]
    counts: dict[str, int] = {}
    for lines in bodies:
        for key, n in msgspec.json.decode(lines[-1])["counts"].items():
            counts[key] = counts.get(key, 0) + n
    end = msgspec.json.encode({"record": "end", "counts": counts}) + b"\n"
    return bodies[0][0] + b"".join(b"".join(lines[1:-1]) for lines in bodies) + end


@pytest.mark.parametrize("later", [False, True], ids=["same-content", "other-content"])
def test_an_archive_holding_a_threads_section_twice_is_refused_at_the_line_it_repeats(
    new_location: Any, later: bool
) -> None:
    source, target = new_location(), new_location()
    with agui_store.open(source) as store:
        record_run(store, "t1", "r1", with_input=True)
        record_run(store, "t1", "r2", parent="r1", with_input=True)
        store.branch("b", "r2", thread_id="t1")
        record_run(store, "t2", "q1")
        first = exported(store)
        if later:  # a backup taken after another run: the same thread, with more in it
            record_run(store, "t1", "r3", parent="r2", with_input=True)
        second = exported(store)
    joined = concatenated(first, second)
    starts = [n for n, line in enumerate(joined.splitlines(), 1)
              if line.startswith(b'{"record":"thread","thread_id":"t1"')]  # fmt: skip
    assert len(starts) == 2
    before = dump(target)
    with agui_store.open(target) as store:
        with pytest.raises(InvalidArgumentError) as refused:
            store.import_archive(io.BytesIO(joined))
        said = str(refused.value)
        assert f"line {starts[1]}: " in said and "thread 't1'" in said, said
        assert f"line {starts[0]}" in said and "once" in said, said
    assert dump(target) == before


@pytest.mark.pydantic_ai
@pytest.mark.parametrize("cid", ["t1", "solo"], ids=["a-threads", "no-threads"])
def test_an_archive_holding_a_conversation_record_twice_is_refused_at_the_line_it_repeats(
    new_location: Any, cid: str
) -> None:
    source, target = new_location(), new_location()
    with agui_store.open(source) as store:
        record_run(store, "t1", "r1")
    save_conversations(source, [("t1", 2, False), ("solo", 2, False)])
    with agui_store.open(source) as store:
        lines = exported(store).splitlines(keepends=True)
    record = next(n for n, line in enumerate(lines) if line.startswith(
        b'{"record":"conversation","conversation_id":"%s"' % cid.encode()))  # fmt: skip
    end = msgspec.json.decode(lines[-1])
    end["counts"]["conversations"] += 1
    lines[-1] = msgspec.json.encode(end) + b"\n"
    twice = b"".join(lines[: record + 1] + lines[record:])
    before = dump(target)
    with agui_store.open(target) as store:
        with pytest.raises(InvalidArgumentError) as refused:
            store.import_archive(io.BytesIO(twice))
        said = str(refused.value)
        assert f"line {record + 2}: " in said and f"conversation {cid!r}" in said, said
        assert f"line {record + 1}" in said and "once" in said, said
    assert dump(target) == before


@pytest.mark.parametrize(
    "moment", [-5, 10**16, 10**19], ids=["before-1970", "year-318857", "past-64-bits"]
)
def test_a_branch_time_no_store_can_show_is_refused_by_line_and_nothing_is_written(
    new_location: Any, moment: int
) -> None:
    source, target = new_location(), new_location()
    with agui_store.open(source) as store:
        record_run(store, "t1", "r1")
        store.branch("b", "r1", thread_id="t1")
        archive = exported(store)
    lines = archive.splitlines()
    line = next(n for n, text in enumerate(lines, 1) if text.startswith(b'{"record":"branch"'))
    edited = re.sub(rb'("record":"branch".*"updated_at":)\d+', rb"\g<1>%d" % moment, archive)
    assert edited != archive
    before = dump(target)
    with agui_store.open(target) as store, pytest.raises(
        InvalidArgumentError, match=f"line {line}: updated_at {moment} is not a time"
    ):
        store.import_archive(io.BytesIO(edited))
    assert dump(target) == before


@pytest.mark.parametrize(
    "edit",
    [
        (b'"parent_run_id":"r1",', b'"parent_run_id":null,'),
        (b'"parent_run_id":"r1",', b""),  # the field gone
        (b'"parent_run_id":"r1",', b'"pbrent_run_id":"r1",'),  # its name misspelt
    ],
    ids=["null", "absent", "renamed"],
)
def test_a_run_record_that_lost_its_parent_but_kept_its_parent_hash_is_refused_by_line(
    new_location: Any, edit: tuple[bytes, bytes]
) -> None:
    source, target = new_location(), new_location()
    with agui_store.open(source) as store:
        record_run(store, "t1", "r1", with_input=True)
        record_run(store, "t1", "r2", parent="r1", with_input=True)
        lines = exported(store).splitlines(keepends=True)
    child = next(n for n, line in enumerate(lines, 1) if b'"run_id":"r2","parent' in line)
    assert edit[0] in lines[child - 1]
    lines[child - 1] = lines[child - 1].replace(*edit)
    before = dump(target)
    with agui_store.open(target) as store, pytest.raises(HashMismatchError) as refused:
        store.import_archive(io.BytesIO(b"".join(lines)))
    assert f"line {child}: run 'r2' of thread 't1'" in str(refused.value)
    assert dump(target) == before


@pytest.mark.pydantic_ai
def test_an_archive_missing_a_conversation_entry_is_refused_naming_it_and_nothing_is_written(
    new_location: Any,
) -> None:
    source, target = new_location(), new_location()
    with agui_store.open(source) as store:
        record_run(store, "t1", "r1")
    save_conversations(source, [("t1", 2, False)])
    with agui_store.open(source) as store:
        lines = exported(store).splitlines(keepends=True)
    entries = [n for n, line in enumerate(lines) if b'"record":"conversation_entry"' in line]
    before = dump(target)
    with agui_store.open(target) as store:
        for lost in (entries[0], entries[-1]):  # the root's line, the head's
            cut = b"".join(lines[:lost] + lines[lost + 1 :])
            with pytest.raises(HashMismatchError, match=r"conversation 't1': entry .* missing"):
                store.import_archive(io.BytesIO(cut))
    assert dump(target) == before


def test_an_archive_path_that_cannot_be_read_is_the_stores_own_error_naming_it(
    new_location: Any, tmp_path: Path
) -> None:
    target = new_location()
    before = dump(target)
    with agui_store.open(target) as store:
        for where in (tmp_path / "missing.jsonl", tmp_path):
            with pytest.raises(agui_store.StorageError, match="cannot read the archive") as e:
                store.import_archive(where)
            assert str(where) in str(e.value) and e.value.path == str(where)
    assert dump(target) == before


class _BytesPath:
    """A path object whose path is bytes, as ``os.PathLike`` allows."""

    def __init__(self, path: bytes) -> None:
        self.path = path

    def __fspath__(self) -> bytes:
        return self.path


def test_an_empty_archive_path_or_one_no_file_can_have_is_refused_naming_what_is_wrong(
    new_location: Any, tmp_path: Path
) -> None:
    target = new_location()
    with agui_store.open(target) as store:
        record_run(store, "t1", "r1")
    before = dump(target)
    folder = tmp_path / "archives"
    folder.mkdir()
    with agui_store.open(target) as store:
        for path, said in (
            ("", "a path is needed"),
            (f"{folder}/a\x00b.jsonl", "NUL"),
            (_BytesPath(os.fsencode(folder) + b"/a\x00b.jsonl"), "NUL"),
            (f"{folder}/\ud800.jsonl", "lone surrogate"),
        ):
            for verb in (store.export_archive, store.import_archive):
                with pytest.raises(InvalidArgumentError, match=said) as e:
                    verb(path)
                assert "archive" in str(e.value) and str(e.value).encode()
    assert dump(target) == before
    assert list(folder.iterdir()) == []


NOT_A_FILE = st.one_of(
    st.none(), st.booleans(), st.integers(), st.floats(allow_nan=True), st.binary(max_size=8),
    st.lists(st.binary(max_size=4), max_size=2), st.dictionaries(st.text(max_size=2), st.none()),
    st.builds(object),
)


@settings(
    max_examples=20, deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
@given(value=NOT_A_FILE)
def test_an_archive_target_source_or_progress_of_the_wrong_type_is_refused_before_any_work(
    store_location: str, tmp_path: Path, value: Any
) -> None:
    with agui_store.open(store_location) as store:
        if not store.threads():
            record_run(store, "t1", "r1")
        before = dump(store_location)
        calls = [lambda: store.import_archive(value), lambda: store.export_archive(value)]
        if value is not None:  # progress=None is no progress
            calls += [
                lambda: store.import_archive(io.BytesIO(exported(store)), progress=value),
                lambda: store.export_archive(tmp_path / "a.agui", progress=value),
            ]
        for call in calls:
            with pytest.raises(agui_store.InvalidArgumentError) as refused:
                call()
            assert isinstance(refused.value, TypeError), refused.value
        assert dump(store_location) == before
        assert not (tmp_path / "a.agui").exists()


def test_an_export_of_a_thread_id_that_is_no_id_is_refused_as_a_bad_argument(
    store_location: str, tmp_path: Path
) -> None:
    with agui_store.open(store_location) as store:
        record_run(store, "t1", "r1")
        for value, wrong_type in ((5, True), (b"t1", True), ("", False)):
            refusal = "thread_id must be a non-empty string"
            with pytest.raises(agui_store.InvalidArgumentError, match=refusal) as refused:
                store.export_archive(tmp_path / "a.agui", thread_id=value)
            assert isinstance(refused.value, TypeError) == wrong_type, value
        assert not (tmp_path / "a.agui").exists()


@pytest.mark.pydantic_ai
def test_a_thread_exports_alone_with_its_conversation_and_a_scope_exports_its_own(
    store_location: str,
) -> None:
    with agui_store.open(store_location) as store:
        record_run(store, "t1", "r1")
        record_run(store, "t2", "q1", scope="alice")
    save_conversations(store_location, [("t1", 1, False), ("solo", 1, False)])
    with agui_store.open(store_location) as store:
        one = exported(store, thread_id="t1")
        assert b'"thread_id":"t2"' not in one and b'"conversation_id":"t1"' in one
        assert b'"conversation_id":"solo"' not in one
        alice = exported(store, scope="alice")
        assert b'"thread_id":"t1"' not in alice and b'"owner":"alice"' in alice
        with pytest.raises(agui_store.RunNotFoundError):
            exported(store, thread_id="t2", scope="bob")
    with tempfile.TemporaryDirectory() as folder:
        with agui_store.open(Path(folder) / "one.db") as store:
            store.import_archive(io.BytesIO(one))
            assert store.threads() == ["t1"]
        assert conversations_of(str(Path(folder) / "one.db"), ["t1", "solo"])["solo"] is None


@pytest.mark.pydantic_ai
def test_an_owners_export_and_copy_carry_the_owners_conversations_no_thread_links_to(
    store_location: str, tmp_path: Path
) -> None:
    from pydantic_ai.conversation import Conversation

    from agui_store.integrations.pydantic_ai import ConversationStore
    from tests.pydantic_ai_conversations import turn

    with agui_store.open(store_location) as store:
        record_run(store, "t1", "r1", scope="alice")

    async def save() -> None:
        async with ConversationStore(store_location) as conversations:
            for cid, owner in (("notes-a", "alice"), ("notes-b", "bob"), ("notes", None)):
                await conversations.save(
                    Conversation(conversation_id=cid, messages=turn(1)), scope=owner
                )

    asyncio.run(save())
    ids = ["notes-a", "notes-b", "notes"]
    with agui_store.open(store_location) as store:
        alice = exported(store, scope="alice")
        everything = exported(store)
    for cid in ids:
        assert (f'"conversation_id":"{cid}"'.encode() in alice) == (cid == "notes-a")
        assert f'"conversation_id":"{cid}"'.encode() in everything
    assert agui_store.copy(store_location, tmp_path / "alice.db", scope="alice").conversations == 1
    held = conversations_of(str(tmp_path / "alice.db"), ids)
    assert held["notes-a"] is not None and held["notes-b"] is None and held["notes"] is None


@pytest.mark.pydantic_ai
def test_a_diverged_conversation_no_thread_links_to_is_refused_naming_no_thread(
    new_location: Any,
) -> None:
    from pydantic_ai.conversation import Conversation

    from agui_store.integrations.pydantic_ai import ConversationStore
    from tests.pydantic_ai_conversations import turn

    async def save(location: str, turns: list[int]) -> None:
        async with ConversationStore(location) as conversations:
            found = await conversations.load("notes")
            talk = found or Conversation(conversation_id="notes", messages=[])
            talk.messages.extend(m for n in turns for m in turn(n))
            await conversations.save(talk)

    source, target = new_location(), new_location()
    with agui_store.open(source) as store:
        record_run(store, "t1", "r1")
    asyncio.run(save(source, [0]))
    assert agui_store.copy(source, target).conversations == 1
    asyncio.run(save(source, [1]))
    asyncio.run(save(target, [2]))  # both saved since: diverged
    with agui_store.open(source) as store:
        archive = exported(store)
    before = dump(target)
    with agui_store.open(target) as store, pytest.raises(SyncConflictError) as refused:
        store.import_archive(io.BytesIO(archive))
    said = str(refused.value)
    assert refused.value.conversation_id == "notes" and "both moved on" in said, said
    # The archive holds it after thread t1's records, but t1 does not link to it.
    assert refused.value.thread_id is None and "thread" not in said, said
    assert dump(target) == before


@pytest.mark.pydantic_ai
def test_an_import_leaves_out_the_erased_last_threads_conversation_but_not_those_after_it(
    store_location: str, tmp_path: Path
) -> None:
    """A whole store's archive ends with the conversations no thread links to, after its
    last thread: that thread erased in the store, its own conversation stays out and the
    others land, as a copy lands them."""
    from pydantic_ai.conversation import Conversation

    from agui_store.integrations.pydantic_ai import ConversationStore
    from tests.pydantic_ai_conversations import turn

    source = str(tmp_path / "source.db")
    with agui_store.open(source) as store:
        record_run(store, "t1", "r1")
        record_run(store, "t2", "q1")

    async def save() -> None:
        async with ConversationStore(source) as conversations:
            for cid in ("t2", "notes"):  # t2's, by its id; one no thread links to
                await conversations.save(Conversation(conversation_id=cid, messages=turn(1)))

    asyncio.run(save())
    with agui_store.open(source) as store:
        archive = exported(store)
    assert archive.rindex(b'"conversation_id":"notes"') > archive.rindex(b'"thread_id":"t2"')
    with agui_store.open(store_location) as store:
        record_run(store, "t2", "q1")
        store.delete_thread("t2")
        landed = store.import_archive(io.BytesIO(archive))
        assert (landed.left_erased, landed.threads, landed.conversations) == (1, 1, 1)
        assert store.threads() == ["t1"]
    held = conversations_of(store_location, ["t2", "notes"])
    assert held["t2"] is None and held["notes"] is not None


@pytest.mark.pydantic_ai
def test_an_import_leaves_out_a_thread_the_store_erased_and_restores_it_only_when_asked(
    store_location: str,
) -> None:
    with agui_store.open(store_location) as store:
        record_run(store, "t1", "r1", with_input=True)
        record_run(store, "t2", "q1")
    save_conversations(store_location, [("t1", 1, False)])
    with agui_store.open(store_location) as store:
        archive = exported(store)
        kept = everything(store)
        store.delete_thread("t1")
        erased = dump(store_location)
        left = store.import_archive(io.BytesIO(archive))
        assert (left.left_erased, left.threads, left.runs, left.conversations) == (1, 0, 0, 0)
    assert dump(store_location) == erased  # nothing of the erased thread came back
    assert conversations_of(store_location, ["t1"])["t1"] is None
    with agui_store.open(store_location) as store:
        back = store.import_archive(io.BytesIO(archive), restore_erased=True)
        assert (back.left_erased, back.threads, back.conversations) == (0, 1, 1)
        # The same runs, hashes and reads; only the thread order is the import's.
        now = everything(store)
        assert now.pop("threads") == ["t2", "t1"] and kept.pop("threads") == ["t1", "t2"]
        assert now == kept and checked(store)
        assert [e.verb for e in store.check().erasures] == ["delete_thread"]
    assert conversations_of(store_location, ["t1"])["t1"] is not None
