"""JSON Patch: ``apply_patch`` answers exactly what the official client's STATE_DELTA does.

The oracle applies each patch the way ``@ag-ui/client`` 1.0.0 does — its reducer replays
``RUN_STARTED, STATE_SNAPSHOT(document), STATE_DELTA(operations)``. A patch the client cannot
apply leaves the state unchanged and logs "Failed to apply state patch"; ``apply_patch`` must
raise :class:`PatchError` for exactly those, and return the client's document otherwise.
"""

from __future__ import annotations

import copy
import json
from typing import Any

import jsonpatch
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from agui_store.errors import AguiStoreError
from agui_store.patch import (
    _ARRAY_PROTO,
    _FUNCTION_PROTO,
    _NUMBER_PROTO,
    _STRING_PROTO,
    UNDEFINED,
    PatchError,
    apply_patch,
)
from tests.oracle_client import Oracle
from tests.strategies import json_values, patches

# ----------------------------------------------------------------------------- helpers

NO_STATE = object()  # the oracle's answer had no "state" (the client's state was a function)


def client_apply(oracle: Oracle, document: Any, operations: Any) -> tuple[bool, Any]:
    """``(applied, state)`` after the official client's reducer applies one STATE_DELTA."""
    events = [
        {"type": "RUN_STARTED", "threadId": "t", "runId": "r"},
        {"type": "STATE_SNAPSHOT", "snapshot": document},
        {"type": "STATE_DELTA", "delta": operations},
    ]
    answer = oracle.replay(events, mode="raw")  # no chunks here: skip their transform
    if not answer["ok"]:
        # The reducer could not clone its new state: the patch put a JS function in it
        # (copied from an inherited property). Compaction applies the same patch the same
        # way and writes the state out as JSON, which drops functions.
        (snapshot,) = oracle.compact(events[1:])
        return True, snapshot.get("snapshot", NO_STATE)
    failed = any(w.startswith("Failed to apply state patch") for w in answer["warnings"])
    return not failed, answer.get("state", NO_STATE)


def strict(value: Any) -> Any:
    """A form of a JSON value where ``1 == 1.0`` but ``1 != True``, as in JS."""
    if isinstance(value, bool) or value is None:
        return ("literal", value)
    if isinstance(value, (int, float)):
        return ("number", float(value))
    if isinstance(value, str):
        return ("string", value)
    if isinstance(value, list):
        return ("array", [strict(item) for item in value])
    if isinstance(value, dict):
        return ("object", {key: strict(item) for key, item in value.items()})
    return ("other", repr(value))


def outcome(document: Any, operations: Any) -> tuple[str, Any]:
    try:
        return "applied", apply_patch(document, operations)
    except PatchError:
        return "failed", None


def assert_agrees_with_client(oracle: Oracle, document: Any, operations: Any) -> None:
    ours, result = outcome(document, operations)
    applied, state = client_apply(oracle, document, operations)
    assert (ours == "applied") == applied, (ours, state)
    if not applied:
        return
    if result is UNDEFINED:
        # JS `undefined` is never stored as state (the client keeps showing the old one),
        # and a JS function (the documented divergence) cannot be cloned at all.
        assert state is NO_STATE or strict(state) == strict(document)
    else:
        assert state is not NO_STATE
        assert strict(result) == strict(state)


# ----------------------------------------------------------------------------- strategies

# Keys where fast-json-patch has a special case: array index forms, '-', escapes, names that
# every JS object, array or string inherits, and the prototype-pollution guards.
TRICKY_KEYS = [
    "a", "b", "0", "1", "2", "01", "00", "", "-", "~", "a/b", "~1", " 1", "1.5", "-1",
    "constructor", "prototype", "__proto__", "toString", "length", "hasOwnProperty", "map",
    "4294967296", "4294967295", "2147483648",
]  # fmt: skip
scalars = st.sampled_from(
    [None, True, False, 0, 1, 1.0, -0.0, 2, 2.5, "", "a", "ab", "1", "😀", "true", "null"]
)
tricky_values = st.recursive(
    scalars,
    lambda inner: (
        st.lists(inner, max_size=3)
        | st.dictionaries(st.sampled_from(TRICKY_KEYS), inner, max_size=3)
    ),
    max_leaves=10,
)
documents = tricky_values | json_values


def escape(key: str) -> str:
    return key.replace("~", "~0").replace("/", "~1")


segments = st.sampled_from(TRICKY_KEYS).map(escape) | st.sampled_from(
    ["~01", "~2", "~", "constructor"]
)
pointers = st.lists(segments, max_size=3).map(lambda keys: "".join(f"/{k}" for k in keys))
# A `from` is not checked for a leading '/': its first segment is then ignored.
loose_pointers = pointers | st.sampled_from(["/", "//", "x/a", "a", "constructor/prototype"])


def existing_pointers(document: Any, prefix: str = "") -> list[str]:
    found = [prefix]
    if isinstance(document, dict):
        for key, value in document.items():
            found += existing_pointers(value, f"{prefix}/{escape(key)}")
    elif isinstance(document, list):
        for index, value in enumerate(document):
            found += existing_pointers(value, f"{prefix}/{index}")
    return found


def look_alikes(value: Any) -> st.SearchStrategy[Any]:
    """The value itself, or one that JS equality tells apart from it (or not: 1 vs 1.0)."""
    variants: list[Any] = [value, copy.deepcopy(value)]
    if isinstance(value, bool):
        variants += [int(value), not value, None]
    elif isinstance(value, (int, float)):
        variants += [float(value), bool(value), str(value), -value]
    elif isinstance(value, str):
        variants += [value + "x", None, [value]]
    elif isinstance(value, list):
        variants += [value[:-1], [*value, None], {str(i): v for i, v in enumerate(value)}]
    elif isinstance(value, dict):
        variants += [{**value, "hasOwnProperty": 1}, {k: v for k, v in list(value.items())[1:]}]
        variants += [{k: [v] for k, v in value.items()}]
    return st.sampled_from(variants)


def operations_on(document: Any) -> st.SearchStrategy[dict[str, Any]]:
    here = st.sampled_from(existing_pointers(document))
    anywhere = here | pointers
    source = here | loose_pointers
    value = tricky_values | json_values
    return st.one_of(
        st.builds(lambda p, v: {"op": "add", "path": p, "value": v}, anywhere, value),
        st.builds(lambda p, v: {"op": "replace", "path": p, "value": v}, anywhere, value),
        st.builds(lambda p: {"op": "remove", "path": p}, anywhere),
        st.builds(lambda p, v: {"op": "test", "path": p, "value": v}, anywhere, value),
        st.builds(lambda f, p: {"op": "copy", "from": f, "path": p}, source, anywhere),
        st.builds(lambda f, p: {"op": "move", "from": f, "path": p}, source, anywhere),
        st.builds(lambda p: {"op": "_get", "path": p}, anywhere),
        # Malformed operations: every field missing or of the wrong type.
        st.fixed_dictionaries(
            {},
            optional={
                "op": st.sampled_from(["add", "remove", "test", "copy", "bogus", "", 1, None]),
                "path": st.sampled_from(["/a", "", "a", 1, None]),
                "from": st.sampled_from(["/a", "", 1, None]),
                "value": value,
            },
        ),
        st.sampled_from([None, 1, "add", [], ["add", "/a"]]),
    )  # fmt: skip


@st.composite
def equality_tests(draw: st.DrawFn, document: Any) -> dict[str, Any]:
    """A ``test`` of a value that exists, against itself or a look-alike."""
    pointer = draw(st.sampled_from(existing_pointers(document)))
    target = document
    for key in pointer.split("/")[1:]:
        key = key.replace("~1", "/").replace("~0", "~")
        target = target[int(key)] if isinstance(target, list) else target[key]
    return {"op": "test", "path": pointer, "value": draw(look_alikes(target))}


# Values that are JS functions: reading *through* one (``/toString/length``) or making the
# whole document one is outside what agui_store.patch models (see its docstring).
FUNCTION_NAMES = _ARRAY_PROTO | _STRING_PROTO | _NUMBER_PROTO | _FUNCTION_PROTO


def in_scope(operations: Any) -> bool:
    """Leaves out the patches agui_store.patch documents as known divergences."""
    if not isinstance(operations, list):
        return True
    for op in operations:
        if not isinstance(op, dict) or op.get("op") not in ("move", "copy"):
            continue
        source = op.get("from")
        if not isinstance(source, str):
            continue
        if op["op"] == "move" and source == "" and op.get("path") != "":
            return False  # the client builds a cyclic state and cannot write it out
        keys = [k.replace("~1", "/").replace("~0", "~") for k in source.split("/")]
        if any(k in FUNCTION_NAMES for k in keys[:-1]):
            return False  # reads a property of a JS function
        if op.get("path") == "" and keys[-1] in FUNCTION_NAMES:
            return False  # makes the document a JS function
    return True


@st.composite
def documents_and_patches(draw: st.DrawFn) -> tuple[Any, Any]:
    document = draw(documents)
    kind = draw(st.sampled_from(["ops", "ops", "ops", "tests", "shared", "not a list"]))
    if kind == "ops":
        operations: Any = draw(
            st.lists(operations_on(document) | equality_tests(document), max_size=4)
        )
    elif kind == "tests":
        operations = draw(st.lists(equality_tests(document), min_size=1, max_size=3))
    elif kind == "shared":
        operations = draw(patches)  # the project's shared STATE_DELTA strategy
    else:
        operations = draw(st.sampled_from([None, {}, "[]", 1, {"op": "add"}]))
    assume(in_scope(operations))
    return document, operations


def profile_examples(factor: float) -> int:
    """Examples for a test, as a multiple of the active hypothesis profile's budget."""
    return max(1, int(settings.default.max_examples * factor))


# ----------------------------------------------------------------------------- the oracle


@pytest.mark.oracle
@settings(max_examples=profile_examples(2))
@given(documents_and_patches())
def test_apply_patch_succeeds_exactly_when_the_client_applies_the_delta_and_gives_its_state(
    oracle: Oracle, case: tuple[Any, Any]
) -> None:
    document, operations = case
    assert_agrees_with_client(oracle, document, operations)


QUIRKS = [
    # (document, operations, expected result or PatchError) — each one also run by the client
    ({"a": 1}, [{"op": "test", "path": "/a", "value": 1.0}], {"a": 1}),
    ({"a": 1}, [{"op": "test", "path": "/a", "value": True}], PatchError),
    ({"a": [1, 2]}, [{"op": "add", "path": "/a/01", "value": 9}], {"a": [1, 9, 2]}),
    ({"a": [1, 2]}, [{"op": "replace", "path": "/a/01", "value": 9}], PatchError),
    ({"a": [1, 2]}, [{"op": "test", "path": "/a/01", "value": 2}], {"a": [1, 2]}),
    ({"a": [1, 2]}, [{"op": "add", "path": "/a/", "value": 9}], {"a": [9, 1, 2]}),
    ({"a": [1, 2]}, [{"op": "add", "path": "/a/4294967296", "value": 9}], {"a": [9, 1, 2]}),
    ({"a": [1, 2]}, [{"op": "add", "path": "/a/3", "value": 9}], PatchError),
    ({"a": [1, 2]}, [{"op": "add", "path": "/a/-", "value": 9}], {"a": [1, 2, 9]}),
    ({"a": [1, 2]}, [{"op": "replace", "path": "/a/-", "value": 9}], PatchError),
    ({"a": [1, 2]}, [{"op": "copy", "from": "/a/0", "path": "/a/9"}], {"a": [1, 2, 1]}),
    ({"a": [1, 2]}, [{"op": "copy", "from": "/a/length", "path": "/n"}], {"a": [1, 2], "n": 2}),
    ({"a": [1, 2]}, [{"op": "move", "from": "/a/length", "path": "/n"}], {"a": [2], "n": 1}),
    ({"x": {"y": 1}}, [{"op": "copy", "from": "x/y", "path": "/z"}], {"x": {"y": 1}, "z": None}),
    ({}, [{"op": "replace", "path": "/constructor", "value": 1}], {"constructor": 1}),
    ({}, [{"op": "remove", "path": "/toString"}], {}),
    ({}, [{"op": "add", "path": "/__proto__", "value": 1}], PatchError),
    ({"constructor": {}}, [{"op": "add", "path": "/constructor/prototype", "value": 1}],
     PatchError),
    ({"a": {"hasOwnProperty": 1}},
     [{"op": "test", "path": "/a", "value": {"hasOwnProperty": 1}}], PatchError),
    ({"a": 1}, [{"op": "remove", "path": ""}], None),
    ({}, [{"op": "copy", "from": "/missing", "path": ""}], UNDEFINED),
    ("abc", [{"op": "test", "path": "/length", "value": 3}], "abc"),
    ("abc", [{"op": "add", "path": "/x", "value": 1}], "abc"),
    (0, [{"op": "replace", "path": "/x", "value": 1}], 0),
    (None, [{"op": "add", "path": "/x", "value": 1}], PatchError),
    ({"a": {"b": 1}}, [{"op": "move", "from": "/a", "path": "/a/b"}], PatchError),
    ({"a": 1}, [{"op": "add", "path": "/b", "value": 2}, {"op": "test", "path": "/a", "value": 2}],
     PatchError),
    ({"a": 1}, [], {"a": 1}),
    ({"a": 1}, {"op": "add", "path": "/b", "value": 2}, PatchError),
]  # fmt: skip


@pytest.mark.oracle
@pytest.mark.parametrize(("document", "operations", "expected"), QUIRKS)
def test_the_documented_departures_from_the_rfc_are_the_clients(
    oracle: Oracle, document: Any, operations: Any, expected: Any
) -> None:
    if expected is PatchError:
        with pytest.raises(PatchError):
            apply_patch(document, operations)
    else:
        result = apply_patch(document, operations)
        assert result is UNDEFINED if expected is UNDEFINED else strict(result) == strict(expected)
    assert_agrees_with_client(oracle, document, operations)


# ----------------------------------------------------------------------------- purity


@settings(max_examples=profile_examples(0.5))
@given(documents_and_patches())
def test_apply_patch_never_mutates_the_document_or_the_operations(case: tuple[Any, Any]) -> None:
    document, operations = case
    before = json.dumps([document, operations], sort_keys=True)
    result = outcome(document, operations)[1]
    assert json.dumps([document, operations], sort_keys=True) == before
    if isinstance(result, (dict, list)):
        # Nothing in the result is shared with the inputs: scribbling on it changes neither.
        scribble(result)
        assert json.dumps([document, operations], sort_keys=True) == before


def scribble(value: Any) -> None:
    if isinstance(value, dict):
        for item in list(value.values()):
            scribble(item)
        value["scribbled"] = True
    elif isinstance(value, list):
        for item in value:
            scribble(item)
        value.append("scribbled")


@settings(max_examples=profile_examples(0.5))
@given(documents_and_patches())
def test_an_applied_patch_returns_plain_json_values_only(
    case: tuple[Any, Any],
) -> None:
    document, operations = case
    kind, result = outcome(document, operations)
    if kind == "applied" and result is not UNDEFINED:
        assert is_plain_json(result)


def is_plain_json(value: Any) -> bool:
    if type(value) is dict:
        return all(type(k) is str and is_plain_json(v) for k, v in value.items())
    if type(value) is list:
        return all(is_plain_json(item) for item in value)
    return value is None or type(value) in (str, int, float, bool)


# ----------------------------------------------------------------------------- errors


def test_patch_error_names_the_failing_operation_and_its_path() -> None:
    operations = [
        {"op": "add", "path": "/a", "value": 1},
        {"op": "replace", "path": "/missing", "value": 2},
    ]
    with pytest.raises(PatchError) as caught:
        apply_patch({}, operations)
    error = caught.value
    assert error.index == 1
    assert error.code == "OPERATION_PATH_UNRESOLVABLE"
    assert error.operation == operations[1]
    assert "operation 1" in str(error) and "/missing" in str(error)
    assert isinstance(error, AguiStoreError) and isinstance(error, ValueError)


def test_a_patch_that_is_not_a_list_fails_as_a_whole() -> None:
    with pytest.raises(PatchError) as caught:
        apply_patch({}, {"op": "add", "path": "/a", "value": 1})
    assert caught.value.index is None
    assert caught.value.code == "SEQUENCE_NOT_AN_ARRAY"


def test_moving_the_whole_document_into_itself_is_refused() -> None:
    with pytest.raises(PatchError, match="into itself"):
        apply_patch({"a": 1}, [{"op": "move", "from": "", "path": "/b"}])


def test_an_undefined_document_is_patched_as_null() -> None:
    gone = apply_patch({}, [{"op": "copy", "from": "/missing", "path": ""}])
    assert gone is UNDEFINED
    assert apply_patch(gone, [{"op": "test", "path": "", "value": None}]) is None
    assert apply_patch(gone, [{"op": "add", "path": "", "value": {"a": 1}}]) == {"a": 1}


# ----------------------------------------------------------------------------- jsonpatch


def jsonpatch_outcome(document: Any, operations: Any) -> tuple[str, Any]:
    try:
        # Copies: jsonpatch inserts the operations' values by reference and mutates them.
        return "applied", jsonpatch.apply_patch(copy.deepcopy(document), copy.deepcopy(operations))
    except (jsonpatch.JsonPatchException, jsonpatch.JsonPointerException):
        return "failed", None


JSONPATCH_DISAGREES = [
    ({"a": 1}, [{"op": "test", "path": "/a", "value": True}]),
    ({"a": [1, 2]}, [{"op": "add", "path": "/a/01", "value": 9}]),
    ({"a": [1, 2]}, [{"op": "copy", "from": "/a/0", "path": "/a/9"}]),
    ({}, [{"op": "replace", "path": "/constructor", "value": 1}]),
    ({"a": [1, 2]}, [{"op": "copy", "from": "/a/length", "path": "/n"}]),
    ("abc", [{"op": "add", "path": "/x", "value": 1}]),
]


@pytest.mark.parametrize(("document", "operations"), JSONPATCH_DISAGREES)
def test_the_jsonpatch_package_answers_differently_from_the_client_here(
    document: Any, operations: Any
) -> None:
    # Why agui_store.patch interprets fast-json-patch itself instead of wrapping jsonpatch
    # (the client's answers are pinned in test_the_documented_departures_from_the_rfc...).
    theirs = jsonpatch_outcome(document, operations)
    ours = outcome(document, operations)
    assert (theirs[0], strict(theirs[1])) != (ours[0], strict(ours[1]))


plain_keys = st.sampled_from(["a", "b", "c", "d"])
plain_values = st.recursive(
    st.none() | st.text(max_size=3),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(plain_keys, inner, max_size=3),
    max_leaves=8,
)


@st.composite
def plain_cases(draw: st.DrawFn) -> tuple[Any, list[dict[str, Any]]]:
    document = draw(st.dictionaries(plain_keys, plain_values, max_size=4))
    here = st.sampled_from(existing_pointers(document)[1:] or ["/a"])
    anywhere = here | st.lists(plain_keys, min_size=1, max_size=2).map(
        lambda keys: "".join(f"/{k}" for k in keys)
    )
    op = st.one_of(
        st.builds(lambda p, v: {"op": "add", "path": p, "value": v}, anywhere, plain_values),
        st.builds(lambda p, v: {"op": "replace", "path": p, "value": v}, anywhere, plain_values),
        st.builds(lambda p: {"op": "remove", "path": p}, anywhere),
        st.builds(lambda p, v: {"op": "test", "path": p, "value": v}, anywhere, plain_values),
        st.builds(lambda f, p: {"op": "copy", "from": f, "path": p}, here, anywhere),
    )
    return document, draw(st.lists(op, max_size=3))


@settings(max_examples=profile_examples(0.5))
@given(plain_cases())
def test_the_jsonpatch_package_agrees_on_plain_patches_over_objects_of_strings(
    case: tuple[Any, list[dict[str, Any]]],
) -> None:
    document, operations = case
    assert jsonpatch_outcome(document, operations) == outcome(document, operations)
