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

from agui_store import testing
from agui_store.errors import AguiStoreError
from agui_store.protocol.patch import UNDEFINED, PatchError, apply_patch
from tests.oracle_client import Oracle
from tests.strategies import json_values, patches

# ----------------------------------------------------------------------------- helpers

NO_STATE = object()  # the oracle's answer had no "state" (the client's state was a function)
UNWRITABLE = object()  # the client's state contains itself: JSON cannot write it out


def client_apply(oracle: Oracle, document: Any, operations: Any) -> tuple[bool, Any]:
    """``(applied, state)`` after the official client's reducer applies one STATE_DELTA."""
    events = [
        {"type": "RUN_STARTED", "threadId": "t", "runId": "r"},
        {"type": "STATE_SNAPSHOT", "snapshot": document},
        {"type": "STATE_DELTA", "delta": operations},
    ]
    answer = oracle.replay(events, mode="raw")  # no chunks here: skip their transform
    if "unwritable" in answer:
        return True, UNWRITABLE  # applied, but the state contains itself
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
    applied, state = client_apply(oracle, document, operations)
    if state is UNWRITABLE:
        # The documented divergence: the client holds a state that contains itself, which
        # no store can hold; apply_patch refuses the patch, naming the move that made it.
        with pytest.raises(PatchError) as caught:
            apply_patch(document, operations)
        assert caught.value.code == "OPERATION_PATH_CYCLIC"
        assert caught.value.operation["op"] == "move" and caught.value.operation["from"] == ""
        return
    ours, result = outcome(document, operations)
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
# whole document one is outside what agui_store.protocol.patch models (see its docstring).
# The methods JavaScript gives every object, array, string, number and function.
FUNCTION_NAMES = frozenset([
    "constructor", "__defineGetter__", "__defineSetter__", "hasOwnProperty", "__lookupGetter__",
    "__lookupSetter__", "isPrototypeOf", "propertyIsEnumerable", "toString", "valueOf",
    "__proto__", "toLocaleString", "at", "concat", "copyWithin", "fill", "find", "findIndex",
    "findLast", "findLastIndex", "lastIndexOf", "pop", "push", "reverse", "shift", "unshift",
    "slice", "sort", "splice", "includes", "indexOf", "join", "keys", "entries", "values",
    "forEach", "filter", "flat", "flatMap", "map", "every", "some", "reduce", "reduceRight",
    "toReversed", "toSorted", "toSpliced", "with", "anchor", "big", "blink", "bold", "charAt",
    "charCodeAt", "codePointAt", "endsWith", "fontcolor", "fontsize", "fixed", "isWellFormed",
    "italics", "link", "localeCompare", "match", "matchAll", "normalize", "padEnd", "padStart",
    "repeat", "replace", "replaceAll", "search", "small", "split", "strike", "sub", "substr",
    "substring", "sup", "startsWith", "toWellFormed", "trim", "trimStart", "trimLeft", "trimEnd",
    "trimRight", "toLocaleLowerCase", "toLocaleUpperCase", "toLowerCase", "toUpperCase",
    "toExponential", "toFixed", "toPrecision", "apply", "bind", "call",
])  # fmt: skip


def in_scope(operations: Any) -> bool:
    """Leaves out the patches agui_store.protocol.patch documents as known divergences."""
    if not isinstance(operations, list):
        return True
    for op in operations:
        if not isinstance(op, dict) or op.get("op") not in ("move", "copy"):
            continue
        source = op.get("from")
        if not isinstance(source, str):
            continue
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
    # Moving the root into itself: the client holds a document that contains itself until
    # a later operation replaces the root or cuts the cycle.
    ({"a": 1}, [{"op": "move", "from": "", "path": "/b"}], PatchError),  # the divergence
    ({"a": 1}, [{"op": "move", "from": "", "path": "/b"}, {"op": "add", "path": "", "value": "s"}],
     "s"),
    ({"a": 1}, [{"op": "move", "from": "", "path": "/b"}, {"op": "remove", "path": "/b"}],
     {"a": 1}),
    ([1], [{"op": "move", "from": "", "path": "/-"}, {"op": "replace", "path": "/1", "value": 2}],
     [1, 2]),
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
        # Nothing in the result is shared with the operations, and what is not shared with
        # the document (untouched subtrees are) is fresh: scribbling on it changes neither.
        # (The strategies may put one object in both the document and a `test` value.)
        assert not containers(result) & (containers(operations) - containers(document))
        scribble(result, containers(document))
        assert json.dumps([document, operations], sort_keys=True) == before


def containers(value: Any) -> set[int]:
    """The ids of the dicts and lists in ``value`` (which the caller keeps alive)."""
    found: set[int] = set()
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, (dict, list)) and id(item) not in found:
            found.add(id(item))
            stack.extend(item.values() if isinstance(item, dict) else item)
    return found


def scribble(value: Any, shared: set[int]) -> None:
    if id(value) in shared:
        return
    if isinstance(value, dict):
        for item in list(value.values()):
            scribble(item, shared)
        value["scribbled"] = True
    elif isinstance(value, list):
        for item in value:
            scribble(item, shared)
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


def test_a_patch_whose_result_contains_itself_is_refused_naming_the_move() -> None:
    patch = [{"op": "add", "path": "/c", "value": 2}, {"op": "move", "from": "", "path": "/b"},
             {"op": "add", "path": "/d", "value": 3}]  # fmt: skip
    with pytest.raises(PatchError, match="into itself") as caught:
        apply_patch({"a": 1}, patch)
    assert (caught.value.index, caught.value.code) == (1, "OPERATION_PATH_CYCLIC")


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
    pytest.param(
        {"a": 1},
        [{"op": "test", "path": "/a", "value": True}],
        marks=pytest.mark.skipif(
            getattr(jsonpatch, "__version__", "") != "1.33",
            reason="jsonpatch 1.48 compares a test's value as JSON, as the client does",
        ),
    ),
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
    # Why agui_store.protocol.patch interprets fast-json-patch itself instead of wrapping jsonpatch
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


# ----------------------------------------------------------------------------- fast path
#
# A plain document takes the path-copying fast path (agui_store.testing.fast_patch),
# which gives up wherever fast-json-patch may depart from the RFC; the exact engine
# (agui_store.testing.exact_patch, the one the oracle tests pin) answers then. Where the
# fast path answers, it must answer exactly what the exact engine does, without writing to
# its input.


def exact_form(value: Any) -> Any:
    """``value`` with its types and key order: ``1``, ``1.0``, ``True`` and ``-0.0`` differ."""
    if isinstance(value, dict):
        return ("dict", type(value).__name__, [(k, exact_form(v)) for k, v in value.items()])
    if isinstance(value, (list, tuple)):
        return ("list", type(value).__name__, [exact_form(v) for v in value])
    return (type(value).__name__, repr(value))


def exact_outcome(document: Any, operations: Any) -> tuple[Any, ...]:
    try:
        return ("applied", exact_form(testing.exact_patch(document, operations)))
    except PatchError as error:
        return ("failed", error.code, error.index, error.reason)


def public_outcome(document: Any, operations: Any) -> tuple[Any, ...]:
    try:
        return ("applied", exact_form(apply_patch(document, operations)))
    except PatchError as error:
        return ("failed", error.code, error.index, error.reason)


def check_fast_path(document: Any, operations: Any) -> bool:
    """The fast path agrees with the exact engine; ``True`` when it answered."""
    before = exact_form([document, operations])
    expected = exact_outcome(document, operations)
    assert exact_form([document, operations]) == before
    answered, fast = testing.fast_patch(document, operations)
    if answered:
        assert expected == ("applied", exact_form(fast))
    assert exact_form([document, operations]) == before
    assert public_outcome(document, operations) == expected
    assert exact_form([document, operations]) == before
    return answered


def pointer_to(keys: list[Any]) -> str:
    return "".join(f"/{escape(str(k))}" for k in keys)


def paths_in(document: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    found = [prefix]
    if isinstance(document, dict):
        for key, value in document.items():
            found += paths_in(value, (*prefix, key))
    elif isinstance(document, list):
        for index, value in enumerate(document):
            found += paths_in(value, (*prefix, index))
    return found


@st.composite
def fast_cases(draw: st.DrawFn) -> tuple[Any, list[dict[str, Any]]]:
    """Plain documents and patches most of which the fast path takes (some it does not)."""
    document: Any = draw(st.dictionaries(st.sampled_from(TRICKY_KEYS), documents, max_size=5)
                    | st.lists(documents, max_size=5))  # fmt: skip
    paths = paths_in(document)
    existing = st.sampled_from([pointer_to(list(p)) for p in paths if p] or ["/missing"])
    # New places: a fresh key in an object, or the end of (or past) an array.
    new: list[str] = []
    for p in paths:
        target = document
        for key in p:
            target = target[key]
        if isinstance(target, dict):
            new.append(pointer_to([*p, "new"]))
        elif isinstance(target, list):
            new += [pointer_to([*p, "-"]), pointer_to([*p, len(target)])]
            new.append(pointer_to([*p, len(target) + 1]))
    anywhere = existing | st.sampled_from(new) | pointers | st.just("")
    value = tricky_values | json_values
    op = st.one_of(
        st.builds(lambda p, v: {"op": "add", "path": p, "value": v}, anywhere, value),
        st.builds(lambda p, v: {"op": "replace", "path": p, "value": v}, anywhere, value),
        st.builds(lambda p: {"op": "remove", "path": p}, anywhere),
        equality_tests(document),
        st.builds(lambda f, p: {"op": "copy", "from": f, "path": p}, existing | loose_pointers,
                  anywhere),
        st.builds(lambda f, p: {"op": "move", "from": f, "path": p}, existing | loose_pointers,
                  anywhere),
    )  # fmt: skip
    return document, draw(st.lists(op, max_size=5))


@settings(max_examples=profile_examples(4))
@given(fast_cases() | documents_and_patches())
def test_the_fast_path_answers_exactly_what_the_exact_engine_does(case: tuple[Any, Any]) -> None:
    document, operations = case
    check_fast_path(document, operations)


FAST_CASES = [
    ({"turns": [1, 2]}, [{"op": "add", "path": "/turns/-", "value": {"n": [3]}}]),
    ({"turns": [1, 2]}, [{"op": "add", "path": "/turns/1", "value": 9}]),
    ({"turns": [1, 2]}, [{"op": "add", "path": "/turns/2", "value": 9}]),
    ({"a": {"b": 1}}, [{"op": "replace", "path": "/a/b", "value": [1.0, None]}]),
    ({"a": {"b": 1}, "c": 2}, [{"op": "remove", "path": "/a"}]),
    ([0, [1, 2]], [{"op": "remove", "path": "/1/0"}]),
    ({"a": {"b": 1}}, [{"op": "test", "path": "/a", "value": {"b": 1.0}}]),
    ({"a": [1, 2]}, [{"op": "move", "from": "/a/0", "path": "/a/-"}]),
    ({"a": [1, 2], "b": {}}, [{"op": "move", "from": "/a", "path": "/b/a"}]),
    ({"a": [1, 2]}, [{"op": "copy", "from": "/a", "path": "/b"},
                     {"op": "add", "path": "/b/-", "value": 3}]),
    ({"a": [1, 2]}, [{"op": "copy", "from": "/a/0", "path": "/a/9"}]),
    ({"a": 1, "b": 2}, [{"op": "move", "from": "/a", "path": "/a"}]),
    ({"a/b": {"~": 1}}, [{"op": "replace", "path": "/a~1b/~0", "value": 2}]),
    ({"a": 1}, [{"op": "replace", "path": "", "value": {"b": [1]}},
                {"op": "add", "path": "/b/-", "value": 2}]),
    ({"a": 1}, [{"op": "test", "path": "", "value": {"a": 1.0}}]),
    ({"a": 1}, []),
]  # fmt: skip


@pytest.mark.parametrize(("document", "operations"), FAST_CASES)
def test_the_fast_path_takes_the_common_patches(document: Any, operations: Any) -> None:
    assert check_fast_path(document, operations)


SLOW_CASES = [case for case in QUIRKS if type(case[0]) in (dict, list)] + [
    ({"a": (1, 2), "b": {"c": UNDEFINED}}, [{"op": "add", "path": "/x", "value": 1}]),
    ({"a": 1}, [{"op": "add", "path": "/x", "value": (1,)}]),
    ({"a": 1}, [{"op": "replace", "path": "/missing", "value": 1}]),
]


@pytest.mark.parametrize(("document", "operations", "_expected"), [
    (*case, None) if len(case) == 2 else case for case in SLOW_CASES
])  # fmt: skip
def test_quirks_failures_and_non_json_values_leave_the_fast_path(
    document: Any, operations: Any, _expected: Any
) -> None:
    if operations == [] or operations == [{"op": "add", "path": "/a/-", "value": 9}]:
        return  # plain after all
    if operations == [{"op": "test", "path": "/a", "value": 1.0}]:
        return
    check_fast_path(document, operations)


def test_a_document_with_non_json_values_gets_the_exact_engines_answer() -> None:
    document = {"a": (1, 2), "b": {"c": UNDEFINED}, "d": {"e": [1]}}
    result = apply_patch(document, [{"op": "add", "path": "/x", "value": 1}])
    assert exact_form(result) == exact_form({"a": [1, 2], "b": {}, "d": {"e": [1]}, "x": 1})
    assert result["d"] is not document["d"]  # built fresh, as the exact engine builds it


# Documents whose keys are all plain (no inherited names, which the exact engine handles).
shareable_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=3),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(plain_keys, inner, max_size=4),
    max_leaves=16,
)


@settings(max_examples=profile_examples(1))
@given(st.data())
def test_subtrees_a_patch_does_not_touch_are_shared_with_the_input(data: st.DataObject) -> None:
    document: Any = data.draw(st.dictionaries(plain_keys, shareable_values, max_size=4))
    places = [p for p in paths_in(document) if p]
    assume(places)
    place = data.draw(st.sampled_from(places))
    value = data.draw(json_values)
    result = apply_patch(
        document, [{"op": "replace", "path": pointer_to(list(place)), "value": value}]
    )
    assert result is not document
    for other in places:
        if other[: len(place)] == place or place[: len(other)] == other:
            continue  # the replaced value, below it, or on the way to it
        mine, theirs = document, result
        for key in other:
            mine, theirs = mine[key], theirs[key]
        if isinstance(mine, (dict, list)):
            assert theirs is mine
    for depth in range(len(place)):
        # The containers on the way down are copies: the input is left as it was.
        mine, theirs = document, result
        for key in place[:depth]:
            mine, theirs = mine[key], theirs[key]
        assert theirs is not mine


def test_a_long_list_gains_an_item_without_being_copied_item_by_item() -> None:
    turns = [{"turn": i, "messages": [{"text": "x"}]} for i in range(1000)]
    document = {"turns": turns, **{f"key{i}": {"v": [i]} for i in range(20)}}
    result = apply_patch(document, [{"op": "add", "path": "/turns/-", "value": {"turn": 1000}}])
    assert len(result["turns"]) == 1001 and len(document["turns"]) == 1000
    assert all(a is b for a, b in zip(result["turns"], turns, strict=False))
    assert all(result[f"key{i}"] is document[f"key{i}"] for i in range(20))
    again = apply_patch(result, [{"op": "add", "path": "/turns/-", "value": {"turn": 1001}}])
    assert len(result["turns"]) == 1001 and len(again["turns"]) == 1002


def test_a_subtree_at_two_places_in_the_input_is_copied_separately_at_each() -> None:
    shared = {"k": [1]}
    document = {"a": shared, "b": shared}
    result = apply_patch(
        document,
        [{"op": "add", "path": "/a/k/-", "value": 2}, {"op": "add", "path": "/b/x", "value": 3}],
    )
    assert result == {"a": {"k": [1, 2]}, "b": {"k": [1], "x": 3}}
    assert shared == {"k": [1]}


def test_a_moved_subtree_is_written_to_once_and_a_copied_one_is_a_copy() -> None:
    document = {"a": {"v": [1]}, "b": {}}
    result = apply_patch(
        document,
        [
            {"op": "copy", "from": "/a", "path": "/c"},
            {"op": "move", "from": "/a", "path": "/b/a"},
            {"op": "add", "path": "/b/a/v/-", "value": 2},
            {"op": "add", "path": "/c/v/-", "value": 3},
        ],
    )
    assert result == {"b": {"a": {"v": [1, 2]}}, "c": {"v": [1, 3]}}
    assert document == {"a": {"v": [1]}, "b": {}}


def test_a_failing_patch_leaves_the_document_as_it_was_after_partial_writes() -> None:
    document = {"a": {"v": [1]}}
    operations = [
        {"op": "add", "path": "/a/v/-", "value": 2},
        {"op": "remove", "path": "/a/v/0"},
        {"op": "test", "path": "/a/v/0", "value": 3},
    ]
    with pytest.raises(PatchError) as caught:
        apply_patch(document, operations)
    assert caught.value.index == 2 and caught.value.code == "TEST_OPERATION_FAILED"
    assert document == {"a": {"v": [1]}}
