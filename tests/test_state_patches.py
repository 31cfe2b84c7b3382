"""Diffs apart from any store: the state patch, a message changed on both sides, and the
``diff`` command. Diffs of stored runs are in tests/contract/test_diff.py."""

from __future__ import annotations

import copy
import io
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import jsonpatch
import pytest
from hypothesis import given
from hypothesis import strategies as st

import agui_store
from agui_store.cli.demo import record_demo
from agui_store.history.diff import common_end, common_start, compare, make_patch, state_patch
from agui_store.protocol.js import json_equal
from agui_store.protocol.patch import apply_patch
from tests.conftest import fixture_params
from tests.strategies import json_values, message_lists

jsonpatch_version = getattr(jsonpatch, "__version__", "")


def run(thread: str, run_id: str, text: str, **started: Any) -> list[dict[str, Any]]:
    return [
        {"type": "RUN_STARTED", "threadId": thread, "runId": run_id, **started},
        {"type": "TEXT_MESSAGE_START", "messageId": f"m-{run_id}"},
        {"type": "TEXT_MESSAGE_CONTENT", "messageId": f"m-{run_id}", "delta": text},
        {"type": "TEXT_MESSAGE_END", "messageId": f"m-{run_id}"},
        {"type": "STATE_DELTA", "delta": [{"op": "add", "path": f"/{run_id}", "value": text}]},
        {"type": "RUN_FINISHED", "threadId": thread, "runId": run_id},
    ]


def test_a_modified_message_carries_both_versions() -> None:
    old = [{"id": "a", "role": "assistant", "content": "draft"}]
    new = [{"id": "a", "role": "assistant", "content": "final"}]
    (change,) = compare(old, {}, new, {}).messages
    assert (change.kind, change.before["content"], change.after["content"]) == (
        "modified",
        "draft",
        "final",
    )
    assert compare(old, {"n": 1}, old, {"n": 1}).empty
    # JSON, not Python, equality: true is not 1.
    assert (
        compare([{"id": "x", "v": True}], 1, [{"id": "x", "v": 1}], True).messages[0].kind
        == "modified"
    )


@given(old=message_lists, new=message_lists, a=json_values, b=json_values)
def test_applying_a_diff_gives_the_other_side(
    old: list[dict[str, Any]], new: list[dict[str, Any]], a: Any, b: Any
) -> None:
    change = compare(old, a, new, b)
    patched = apply_patch(copy.deepcopy(a), change.state_patch)
    # Numbers compare as JSON numbers (0 == 0.0), booleans stay booleans.
    assert patched == b and json.dumps(patched).count("true") == json.dumps(b).count("true")
    assert jsonpatch.apply_patch(copy.deepcopy(a), change.state_patch) == b
    by_id = {m["id"]: m for m in old}
    for c in change.messages:
        if c.kind == "removed":
            del by_id[c.id]
        else:
            by_id[c.id] = c.after
    assert by_id == {m["id"]: m for m in new}


@pytest.mark.parametrize("events", fixture_params())
def test_the_diff_command_compares_every_run_of_a_recording_with_its_first(
    tmp_path: Path, events: list[dict[str, Any]]
) -> None:
    """``agui-store diff --json`` on an upstream recording, imported as a user would: each
    run against the first, and the state patch it prints takes one state to the other."""
    from agui_store.cli import main

    recording, db = tmp_path / "recording.json", str(tmp_path / "store.db")
    recording.write_text(json.dumps(events), encoding="utf-8")
    assert main(["--db", db, "import", str(recording)], out=io.StringIO()) == 0
    with agui_store.open(db) as store:
        (thread,) = store.threads()
        runs = [r.run_id for r in store.runs(thread)]
        states = {r: store.checkout(r, thread_id=thread).state for r in runs}
    for other in runs:
        out = io.StringIO()
        argv = ["--db", db, "--json", "diff", runs[0], other, "--thread", thread]
        assert main(argv, out=out) == 0
        printed = json.loads(out.getvalue())
        patched = apply_patch(copy.deepcopy(states[runs[0]]), printed["changes"]["statePatch"])
        # An imported recording's runs form one chain, so the first is the merge base.
        assert printed["mergeBase"] == runs[0] and json_equal(patched, states[other])


def test_diff_from_the_command_line_in_text_json_and_stat(tmp_path: Path) -> None:
    db = tmp_path / "s.db"
    with agui_store.open(db) as store:
        thread, _ = record_demo(store)

    def cli(*args: str) -> str:
        return subprocess.run(
            [sys.executable, "-m", "agui_store", *args, "--db", str(db)],
            capture_output=True,
            text=True,
            check=True,
        ).stdout

    text = cli("diff", "run-2", "fahrenheit", "--thread", thread)
    assert "\033[" not in text and "+ [user-3]" in text and "(merge base: run-1)" in text
    doc = json.loads(cli("diff", "run-2", "run-3", "--thread", thread, "--json"))
    assert doc["mergeBase"] == "run-1" and doc["changes"]["statePatch"][0]["path"] == "/units"
    stat = cli("diff", "run-2", "run-3", "--thread", thread, "--stat")
    assert "+2 -0 ~0 messages, 1 state op" in stat and "1 state ops" not in stat
    fork = json.loads(cli("fork", "run-1", "--thread", thread, "--run-id", "next"))
    assert fork["parentRunId"] == "run-1" and fork["runId"] == "next"
    graph_text = cli("log", "--graph", "--thread", thread)
    assert graph_text.splitlines()[2] == "|/"


def test_a_state_patch_never_moves_a_value_into_its_own_child() -> None:
    """Pairing equal values answers this pair with a move of /2 into /2/0, which RFC 6902
    forbids and the official client rejects; the diff falls back to a plain patch."""
    old, new = [None, None, []], [None, [], [None]]
    ops = state_patch(old, new)
    assert apply_patch(copy.deepcopy(old), ops) == new
    assert all(op["op"] in ("add", "remove", "replace") for op in ops)


_small_values = st.integers(0, 3) | st.sampled_from([None, True, False, 1.0, "x"]) | st.lists(
    st.integers(0, 3), max_size=2
)


@st.composite
def _lists_that_share_a_start(draw: st.DrawFn) -> tuple[Any, Any]:
    """Two documents holding long lists that start alike and then differ (values from a
    small pool, so that jsonpatch pairs removals with additions into moves)."""
    shared = draw(st.lists(_small_values, min_size=0, max_size=120))
    old = shared + draw(st.lists(_small_values, max_size=8))
    new = shared + draw(st.lists(_small_values, max_size=8))
    if draw(st.booleans()):  # an edit inside the shared start too
        at = draw(st.integers(0, max(0, len(new) - 1)))
        new = [*new[:at], draw(_small_values), *new[at + 1 :]]
    if draw(st.booleans()):
        return {"turns": old, "same": shared}, {"turns": new, "same": list(shared)}
    return [old, 1], [new, 1]


def _shifted(ops: list[dict[str, Any]], by: int) -> list[dict[str, Any]]:
    """The operations with the first index of each path moved ``by`` places on."""

    def shift(pointer: str) -> str:
        first, _, rest = pointer[1:].partition("/")
        return f"/{int(first) + by}" + (f"/{rest}" if rest else "")

    return [{k: shift(v) if k in ("path", "from") else v for k, v in op.items()} for op in ops]


@given(pair=_lists_that_share_a_start())
def test_a_state_patch_past_a_shared_list_start_is_the_patch_of_what_follows_it(
    pair: Any,
) -> None:
    """Equal elements make no operation, so a long shared start is skipped whole: the patch
    of two lists that share a start is the patch of their rests, indices moved on."""
    old, new = pair
    if isinstance(old, dict):
        old, new = old["turns"], new["turns"]
    else:
        old, new = old[0], new[0]
    shared = common_start(old, new)
    assert make_patch(old, new) == _shifted(make_patch(old[shared:], new[shared:]), shared)


@given(pair=_lists_that_share_a_start() | st.tuples(json_values, json_values))
def test_a_state_patch_applied_by_the_client_rules_gives_the_new_state(pair: Any) -> None:
    old, new = pair
    assert json_equal(apply_patch(copy.deepcopy(old), state_patch(old, new)), new)


def test_a_state_patch_keeps_the_operations_recorded_for_hundreds_of_pairs() -> None:
    """``tests/data/state_patches.json`` holds pairs of documents, made by random edits
    that move, insert, remove and rename, with the operations the diff gave them when it
    was built on jsonpatch 1.33's diff builder (objects' keys compared in sorted order).
    The diff keeps them exactly: the same moves, indices and order."""
    cases = json.loads((Path(__file__).parent / "data" / "state_patches.json").read_text())
    assert len(cases) > 400
    for case in cases:
        assert make_patch(case["old"], case["new"]) == case["ops"], case


@pytest.mark.skipif(
    jsonpatch_version != "1.33",
    reason=f"compares with jsonpatch 1.33's make_patch (installed: {jsonpatch_version})",
)
@given(pair=_lists_that_share_a_start() | st.tuples(json_values, json_values))
def test_a_state_patch_without_moves_is_jsonpatch_133s_in_another_order(pair: Any) -> None:
    """jsonpatch 1.33 walks an object's keys as a set, in an order that changes with the
    hash seed; the diff walks them sorted. (Which removed value it pairs with an added one
    as a move depends on that order, so a patch with moves may pair them otherwise.)"""
    old, new = pair
    ops = make_patch(old, new)
    if not any(op["op"] == "move" for op in ops):
        assert sorted(ops, key=json.dumps) == sorted(
            jsonpatch.make_patch(old, new).patch, key=json.dumps
        )


def test_a_diff_prints_the_same_state_patch_whatever_the_hash_seed(tmp_path: Path) -> None:
    """jsonpatch walks an object's keys as a set: the order of its operations changed with
    PYTHONHASHSEED, so two processes printed one diff two ways."""
    script = (
        "import json; from agui_store.history import diff\n"
        "old = {f'k{i}': i for i in range(40)}\n"
        "new = {**{f'k{i}': i + 1 for i in range(0, 40, 3)}, **{f'n{i}': i for i in range(20)}}\n"
        "for k in list(old)[1::4]: new.pop(k, None)\n"
        "print(json.dumps(diff.state_patch({'s': old}, {'s': new})))\n"
    )
    outputs = {
        subprocess.run(
            [sys.executable, "-c", script],
            env={**os.environ, "PYTHONHASHSEED": str(seed)},
            capture_output=True,
            text=True,
            check=True,
        ).stdout
        for seed in (1, 2, 3, 4)
    }
    assert len(outputs) == 1, outputs


@given(
    shared=st.lists(st.integers(0, 3), max_size=40),
    a=st.lists(st.integers(0, 3), max_size=40),
    b=st.lists(st.integers(0, 3), max_size=40),
    limit=st.none() | st.integers(0, 90),
)
def test_common_start_and_common_end_count_the_elements_two_sequences_share_at_each_end(
    shared: list[int], a: list[int], b: list[int], limit: int | None
) -> None:
    def counted(x: list[int], y: list[int]) -> int:
        n = 0
        while n < min(len(x), len(y)) and x[n] == y[n]:
            n += 1
        return n if limit is None else min(n, limit)

    first, second = shared + a, shared + b
    assert common_start(first, second, limit) == counted(first, second)
    first, second = a + shared, b + shared
    assert common_end(first, second, limit) == counted(first[::-1], second[::-1])
    text_a, text_b = "".join(map(str, first)), "".join(map(str, second))
    assert common_end(text_a, text_b, limit) == counted(first[::-1], second[::-1])
