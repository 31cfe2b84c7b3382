"""The nesting rules on their own (no store): how deep a value and a pointer go, which
patch operations write too deep, and that escaped spellings are not a way around them."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

import agui_store
from agui_store import InvalidEventError
from agui_store.codec import ingest
from agui_store.history import nesting
from agui_store.protocol import validate
from agui_store.protocol.patch import UNDEFINED, PatchError, apply_patch

json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=3),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=2), inner,
                                                                max_size=3),
    max_leaves=12,
)


def _reference_depth(value: object) -> int:
    if isinstance(value, dict):
        return 1 + max(map(_reference_depth, value.values()), default=0)
    if isinstance(value, list):
        return 1 + max(map(_reference_depth, value), default=0)
    return 0


@given(json_values)
def test_depth_of_counts_levels_like_the_recursive_definition(value: object) -> None:
    assert nesting.depth_of(value) == _reference_depth(value)


def test_depth_of_measures_what_recursion_cannot() -> None:
    value: object = 1
    for _ in range(100_000):
        value = [value]
    assert nesting.depth_of(value) == 100_000


@pytest.mark.parametrize(("pointer", "levels"), [("", 0), ("/", 1), ("/a/0", 2), ("/a~1b", 1)])
def test_a_pointer_goes_down_one_level_per_token(pointer: str, levels: int) -> None:
    assert nesting.pointer_depth(pointer) == levels


def _checked(text: str, max_depth: int) -> None:
    """What append runs on a batch: with the events' texts (the fast path) and without."""
    incoming = ingest.parse_events(text)
    data = [ev.data for ev in incoming]
    types = validate.validate_events(data)
    for raws in (None, [ev.raw for ev in incoming]):
        with pytest.raises(InvalidEventError) as caught:
            nesting.refuse_deep_writes(data, types, max_depth, raws)
        assert (caught.value.index, caught.value.path) == (0, "$.delta[0]")


def test_a_path_whose_slashes_are_escaped_is_measured_all_the_same() -> None:
    path = "\\u002fa" * 6  # "/a/a/a/a/a/a", spelled with escapes
    _checked('{"type":"STATE_DELTA","delta":[{"op":"add","path":"' + path + '","value":1}]}', 6)


def test_a_value_that_is_deep_enough_is_refused_with_or_without_the_text() -> None:
    op = json.dumps({"op": "add", "path": "/a/b/c", "value": [[[1]]]})
    _checked('{"type":"STATE_DELTA","delta":[' + op + "]}", 6)


def test_an_escaped_copy_is_replayed_like_a_plain_one(tmp_path: Path) -> None:
    grow = '{"type":"STATE_DELTA","delta":[{"op":"\\u0063opy","from":"","path":"/a"}]}'
    start = '{"type":"RUN_STARTED","threadId":"t","runId":"r1"}\n' \
            '{"type":"STATE_SNAPSHOT","snapshot":{"a":1}}\n'
    with agui_store.open(tmp_path / "store.db", max_depth=5) as store:
        with pytest.raises(InvalidEventError, match="copies a value 5 levels deep") as caught:
            store.append(start + "\n".join([grow] * 6))
        assert caught.value.index == 5


def test_copies_and_deepening_moves_are_found_from_the_data_whatever_the_text_says() -> None:
    events = [{"type": "STATE_DELTA", "delta": [{"op": "move", "from": "/a", "path": "/b/c"}]},
              {"type": "STATE_DELTA", "delta": [{"op": "copy", "from": "/a/b", "path": "/c"}]},
              {"type": "STATE_DELTA", "delta": [{"op": "move", "from": "/a/b", "path": "/c"}]},
              {"type": "ACTIVITY_DELTA", "messageId": "m", "activityType": "x",
               "patch": [{"op": "copy", "from": "", "path": "/x"}]},
              {"type": "CUSTOM", "name": "copy", "value": {"op": "copy", "from": "", "path": "/x"}}]
    types = [e["type"] for e in events]
    raws = [ingest.encode(e) for e in events]
    # A copy clones (any copy can grow the state); a move only nests it deeper, or not.
    assert nesting.replayed_copies(events, types) == [0, 1, 3]
    assert nesting.replayed_copies(events, types, raws) == [0, 1, 3]


def client_reads(document: Any, pointer: str) -> Any:
    """What the client reads at ``pointer`` of ``document`` (fast-json-patch's
    ``getValueByPointer``): in an object or an array, what a copy from there copies out to a
    key of its own; in a scalar, JavaScript's property access: a string's UTF-16 unit at an
    index, nothing (undefined) at any other key."""
    if pointer == "":
        return document
    if isinstance(document, (dict, list)):
        read = {"op": "copy", "from": "/w" + pointer, "path": "/read"}
        return apply_patch({"w": document}, [read]).get("read", UNDEFINED)
    key = pointer[1:]
    if isinstance(document, str) and key.isdigit() and str(int(key)) == key:
        units = document.encode("utf-16-le", "surrogatepass")
        if int(key) < len(units) // 2:
            return units[2 * int(key) : 2 * int(key) + 2].decode("utf-16-le", "surrogatepass")
    return UNDEFINED


@given(json_values, st.lists(st.sampled_from(["", "/a", "/b", "/0", "/a/b"]), max_size=6))
def test_what_a_patch_clones_is_the_json_of_each_copied_value_before_it_is_copied(
    document: object, sources: list[str]
) -> None:
    operations = [{"op": "copy", "from": f, "path": f"/n{i}"} for i, f in enumerate(sources)]
    cloned, current = [], document
    for op in operations:  # the reference: each source read, then the copy made
        try:
            applied = apply_patch(current, [op])
        except PatchError:
            break
        source = client_reads(current, op["from"])
        # What the client reads at a missing "from" (undefined) clones nothing.
        cloned.append(0 if source is UNDEFINED else len(ingest.encode(source)))
        current = applied
    total = sum(cloned)
    assert nesting.copy_problem(document, operations[: len(cloned)], 10**6, total) is None
    if total:
        found = nesting.copy_problem(document, operations[: len(cloned)], 10**6, total - 1)
        last = max(n for n, size in enumerate(cloned) if size)
        assert found is not None and found.cloned == total and found.op == last


@pytest.mark.parametrize("max_depth", [0, 1, 513, 10_000, 64.0, "64"])
def test_a_store_refuses_a_max_depth_its_readers_could_not_read_back(
    tmp_path: Path, max_depth: object
) -> None:
    with pytest.raises(ValueError, match="max_depth"):
        agui_store.open(tmp_path / "store.db", max_depth=max_depth)
    assert not (tmp_path / "store.db").exists()


def test_a_state_as_deep_as_the_largest_max_depth_allows_reads_back(tmp_path: Path) -> None:
    from agui_store.store import MAX_DEPTH_LIMIT

    state: object = {}
    for _ in range(MAX_DEPTH_LIMIT - 2):
        state = {"a": state}
    with agui_store.open(tmp_path / "store.db", max_depth=MAX_DEPTH_LIMIT) as store:
        store.append([{"type": "RUN_STARTED", "threadId": "t", "runId": "r1"},
                      {"type": "STATE_SNAPSHOT", "snapshot": state},
                      {"type": "RUN_FINISHED", "threadId": "t", "runId": "r1"}])
        co = store.checkout("r1", thread_id="t")
        assert co.state == state
        str(co), co._repr_html_(), store.fork("r1", thread_id="t")
        assert store.check().ok
