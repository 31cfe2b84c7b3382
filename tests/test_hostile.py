"""Hostile input on every ingest path: one clear library error, never a crash, never a hang,
and the file exactly as it was.

Every ``append`` path is fuzzed with hypothesis: JSON text and bytes (one event, an array, JSON
Lines), SSE, lists of per-event texts, files and paths, dicts, ``ag_ui.core`` pydantic events
and the library's msgspec structs. The inputs are legal streams (``tests.strategies``) broken
on purpose — truncated, invalid UTF-8, NaN and infinities, non-object events, wrong kinds,
missing required fields (the official pydantic models say which), illegal sequences, huge
strings, absurd nesting (a million brackets), duplicate run ids, events naming another thread —
plus raw garbage. Each time the error must be one ``AguiStoreError`` that is also a
``ValueError``, name the batch index, event type and JSON path where the fault has them, come
within a time limit, and leave a full dump of the file unchanged.
"""

from __future__ import annotations

import faulthandler
import io
import itertools
import json
import math
import signal
import typing
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

import agui_store
from agui_store import AguiStoreError, InvalidEventError, SequenceError
from agui_store.codec import ingest
from tests.strategies import legal_streams
from tests.workers.harness import dump, scale

core = pytest.importorskip("ag_ui.core")

#: Cheap properties get more examples than the profile's default.
MANY = settings(
    max_examples=scale(dev=100, ci=500), suppress_health_check=[HealthCheck.too_slow], deadline=None
)
SOME = settings(
    max_examples=scale(dev=40, ci=200), suppress_health_check=[HealthCheck.too_slow], deadline=None
)

MILLION = 10**6
#: Longest acceptable error message: errors name places, they do not echo megabytes back.
MAX_MESSAGE = 2_000
SMALL_LIMIT = 4_096
SMALL_DEPTH = 8


class Hang(BaseException):
    """Raised by the watchdog; a BaseException so that no ``except Exception`` swallows it."""


@contextmanager
def within(seconds: float) -> Iterator[None]:
    """Fail (raise Hang) if the block runs longer than ``seconds``."""

    def expire(signum: int, frame: Any) -> None:
        raise Hang(f"no answer within {seconds} s")

    previous = signal.signal(signal.SIGALRM, expire)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


@pytest.fixture(scope="module", autouse=True)
def last_resort_watchdog() -> Iterator[None]:
    # A hang inside C code never returns to the interpreter for the SIGALRM handler to run:
    # then dump every thread's stack and end the run rather than hang CI.
    faulthandler.dump_traceback_later(600, exit=True)
    yield
    faulthandler.cancel_dump_traceback_later()


@dataclass(repr=False)
class Target:
    """An open store with content, and a dump of that content."""

    store: agui_store.Store
    path: Path
    baseline: dict[str, Any]

    def __repr__(self) -> str:  # hypothesis prints it with every falsifying example
        return f"Target({self.path.name})"

    def refuse(self, source: Any, *, seconds: float = 20, **options: Any) -> AguiStoreError:
        """``append(source)`` must raise one library error and change nothing."""
        with within(seconds):
            try:
                result = self.store.append(source, **options)
            except AguiStoreError as error:
                caught: AguiStoreError = error
            else:
                self.baseline = dump(self.path)
                raise AssertionError(f"accepted: {result}")
        assert isinstance(caught, ValueError), f"{type(caught).__name__} is not a ValueError"
        assert not isinstance(caught, RecursionError)
        assert len(str(caught)) <= MAX_MESSAGE, f"a {len(str(caught))}-character message"
        assert dump(self.path) == self.baseline, "a refused append changed the file"
        return caught

    def attempt(self, source: Any, **options: Any) -> AguiStoreError | None:
        """Either the append lands (and only adds), or it is refused as by :meth:`refuse`."""
        before = self.baseline
        with within(20):
            try:
                result = self.store.append(source, **options)
            except AguiStoreError as error:
                assert isinstance(error, ValueError)
                assert len(str(error)) <= MAX_MESSAGE
                assert dump(self.path) == before, "a refused append changed the file"
                return error
        after = dump(self.path)
        assert after["events"][: len(before["events"])] == before["events"]
        assert len(after["events"]) - len(before["events"]) == result.event_count
        self.baseline = after
        return None


def make_target(path: Path, **options: Any) -> Target:
    store = agui_store.open(path, **options)
    store.append(
        [
            {"type": "RUN_STARTED", "threadId": "base", "runId": "base-1"},
            {"type": "TEXT_MESSAGE_START", "messageId": "m", "role": "assistant"},
            {"type": "TEXT_MESSAGE_CONTENT", "messageId": "m", "delta": "kept"},
            {"type": "TEXT_MESSAGE_END", "messageId": "m"},
            {"type": "RUN_FINISHED", "threadId": "base", "runId": "base-1"},
        ]
    )
    # A live run in another thread: batches that start no run continue it.
    store.append(
        [
            {"type": "RUN_STARTED", "threadId": "live", "runId": "live-1"},
            {"type": "TEXT_MESSAGE_START", "messageId": "l", "role": "assistant"},
        ]
    )
    return Target(store, path, dump(path))


@pytest.fixture(scope="module")
def target(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Target]:
    t = make_target(tmp_path_factory.mktemp("hostile") / "store.db")
    yield t
    t.store.close()


@pytest.fixture(scope="module")
def scratch(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A file the path-taking examples write their input to."""
    return tmp_path_factory.mktemp("inputs") / "input.txt"


@pytest.fixture(scope="module")
def tight(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Target]:
    """A store opened with small custom limits."""
    t = make_target(
        tmp_path_factory.mktemp("tight") / "store.db",
        max_event_bytes=SMALL_LIMIT,
        max_depth=SMALL_DEPTH,
    )
    yield t
    t.store.close()


# --- building inputs ----------------------------------------------------------------------


_EXAMPLES = itertools.count()


@st.composite
def streams(draw: st.DrawFn, max_runs: int = 2) -> list[dict[str, Any]]:
    """A legal stream in thread ``fz`` with run ids no other example uses (hypothesis draws
    the same few uuids again and again, hence the counter)."""
    # Fixed width: the counter must not change sizes that later draws depend on.
    tag = f"{draw(st.uuids()).hex[:8]}-{next(_EXAMPLES):09d}"
    events = draw(
        legal_streams(
            thread_id="fz",
            max_runs=max_runs,
            max_steps=8,
            run_ids=[f"fz-{tag}-{i}" for i in range(max_runs)],
        )
    )
    return [dict(e) for e in events]


TEXT_FRAMINGS = ["array", "jsonl", "jsonl-crlf", "sse", "sse-crlf"]


def frame(events: list[dict[str, Any]], how: str) -> tuple[bytes, list[tuple[int, int]]]:
    """The stream as text in one framing, and each event's byte span in it."""
    texts = [json.dumps(e, ensure_ascii=False, separators=(",", ":")).encode() for e in events]
    spans: list[tuple[int, int]] = []
    out = bytearray()
    newline = b"\r\n" if how.endswith("crlf") else b"\n"
    if how == "array":
        out += b"["
    for i, text in enumerate(texts):
        if how == "array" and i:
            out += b","
        if how.startswith("sse"):
            out += b"data: "
        spans.append((len(out), len(out) + len(text)))
        out += text
        if how.startswith("jsonl"):
            out += newline
        elif how.startswith("sse"):
            out += newline + newline
    if how == "array":
        out += b"]"
    return bytes(out), spans


def deliver(text: bytes, kind: str, tmp: Path) -> Any:
    """The same text handed over as str, bytes, bytearray, memoryview, a file or a path."""
    if kind == "str":
        return text.decode("utf-8", "surrogateescape")
    if kind == "bytearray":
        return bytearray(text)
    if kind == "memoryview":
        return memoryview(text)
    if kind == "file":
        return io.BytesIO(text)
    if kind == "path":
        tmp.write_bytes(text)
        return tmp
    return text


BYTE_KINDS = ["bytes", "bytearray", "memoryview", "file", "path"]
KINDS = ["str", *BYTE_KINDS]


def expect_index(error: AguiStoreError, k: int, how: str) -> None:
    assert isinstance(error, InvalidEventError), type(error)
    if how.startswith("jsonl") and k == 0:
        # A first line that is not a JSON object hides that the input is JSON Lines at all.
        assert error.index in (0, None), error
    else:
        assert error.index == k, f"index {error.index}, expected {k}: {error}"


# --- text: truncated, invalid UTF-8, NaN, non-objects -------------------------------------


@MANY
@given(
    events=streams(),
    how=st.sampled_from(TEXT_FRAMINGS),
    kind=st.sampled_from(KINDS),
    data=st.data(),
)
def test_truncated_json_is_refused_naming_the_event_it_cuts(
    target: Target,
    scratch: Path,
    events: list[dict[str, Any]],
    how: str,
    kind: str,
    data: st.DataObject,
) -> None:
    text, spans = frame(events, how)
    k = data.draw(st.integers(0, len(events) - 1), label="event")
    start, end = spans[k]
    cut = data.draw(st.integers(start + 1, end - 1), label="cut")
    if kind == "str":  # cut between characters: a str cannot hold half of one
        while cut > start + 1 and text[cut] & 0xC0 == 0x80:
            cut -= 1
    if how == "array":
        broken = text[:cut]  # the input ends inside event k
    else:
        line_end = text.index(b"\n", end) if b"\n" in text[end:] else len(text)
        broken = text[:cut] + text[line_end:]  # event k's line loses its end
    error = target.refuse(deliver(broken, kind, scratch))
    expect_index(error, k, how)


BAD_UTF8 = [b"\xff", b"\xfe", b"\xc0\xaf", b"\x80", b"\xed\xa0\x80", b"\xe2\x82", b"\xf8\x88\x80"]


@MANY
@given(
    events=streams(),
    how=st.sampled_from(TEXT_FRAMINGS),
    kind=st.sampled_from(BYTE_KINDS),
    bad=st.sampled_from(BAD_UTF8),
    data=st.data(),
)
def test_invalid_utf8_anywhere_in_an_event_is_refused_naming_the_event(
    target: Target,
    scratch: Path,
    events: list[dict[str, Any]],
    how: str,
    kind: str,
    bad: bytes,
    data: st.DataObject,
) -> None:
    text, spans = frame(events, how)
    k = data.draw(st.integers(0, len(events) - 1), label="event")
    start, end = spans[k]
    at = data.draw(st.integers(start + 1, end - 1), label="at")
    broken = text[:at] + bad + text[at:]
    error = target.refuse(deliver(broken, kind, scratch))
    expect_index(error, k, how)


@SOME
@given(
    events=streams(),
    how=st.sampled_from(TEXT_FRAMINGS),
    bad=st.sampled_from(BAD_UTF8),
    reader=st.sampled_from(["append", "import_file"]),
    data=st.data(),
)
def test_a_text_mode_file_over_bytes_that_are_not_utf8_is_refused_naming_the_byte(
    target: Target,
    scratch: Path,
    events: list[dict[str, Any]],
    how: str,
    bad: bytes,
    reader: str,
    data: st.DataObject,
) -> None:
    """Python's text file decodes before the store sees a byte: its UnicodeDecodeError
    counts from whatever block it decoded, so the store names the offset in the file."""
    text, _ = frame(events, how)
    at = data.draw(st.integers(0, len(text)), label="at")
    broken = text[:at] + bad + text[at:]
    with pytest.raises(UnicodeDecodeError) as decoded:
        broken.decode("utf-8")
    scratch.write_bytes(broken)
    with open(scratch, encoding="utf-8") as handle:
        if reader == "append":
            error = target.refuse(handle)
        else:
            with pytest.raises(InvalidEventError) as raised:
                target.store.import_file(handle)
            error = raised.value
            assert dump(target.path) == target.baseline, "a refused import changed the file"
    assert f"not valid utf-8 text: {decoded.value.reason} at byte {decoded.value.start};" in str(
        error
    )


def test_a_text_mode_file_read_past_its_first_block_names_the_byte_in_the_file(
    target: Target, scratch: Path
) -> None:
    lines = [
        json.dumps({"type": "CUSTOM", "name": f"n{i}", "value": "x" * 50}) for i in range(4000)
    ]
    good = ("\n".join(lines) + "\n").encode()
    broken = good[:200_000] + b"\xff" + good[200_000:]
    scratch.write_bytes(broken)
    with open(scratch, encoding="utf-8") as handle:
        error = target.refuse(handle)
    assert "at byte 200000;" in str(error)
    with open(scratch, encoding="utf-8") as handle, pytest.raises(InvalidEventError) as raised:
        target.store.import_file(handle)
    assert "at byte 200000;" in str(raised.value)


@SOME
@given(events=streams(), how=st.sampled_from(TEXT_FRAMINGS), data=st.data())
def test_a_lone_surrogate_in_text_is_refused(
    target: Target, events: list[dict[str, Any]], how: str, data: st.DataObject
) -> None:
    text, spans = frame(events, how)
    k = data.draw(st.integers(0, len(events) - 1), label="event")
    as_str = text.decode()
    start = len(text[: spans[k][0]].decode())
    end = len(text[: spans[k][1]].decode())
    at = data.draw(st.integers(start + 1, end - 1), label="at")
    target.refuse(as_str[:at] + "\ud800" + as_str[at:])


@MANY
@given(
    events=streams(),
    how=st.sampled_from(TEXT_FRAMINGS),
    kind=st.sampled_from(KINDS),
    literal=st.sampled_from(["NaN", "Infinity", "-Infinity", "1e400", "-1e999"]),
    data=st.data(),
)
def test_nan_infinity_and_overflowing_numbers_are_refused_naming_the_event(
    target: Target,
    scratch: Path,
    events: list[dict[str, Any]],
    how: str,
    kind: str,
    literal: str,
    data: st.DataObject,
) -> None:
    text, spans = frame(events, how)
    k = data.draw(st.integers(0, len(events) - 1), label="event")
    start, _ = spans[k]
    broken = text[: start + 1] + b'"x-number":' + literal.encode() + b"," + text[start + 1 :]
    error = target.refuse(deliver(broken, kind, scratch))
    expect_index(error, k, how)
    if literal.startswith(("1e", "-1e")):
        assert isinstance(error, InvalidEventError) and error.path == '$["x-number"]'


NON_OBJECTS = [b"5", b"-1.5", b'"an event"', b"null", b"true", b"[]", b'[{"type":"RAW"}]']


@SOME
@given(
    events=streams(),
    how=st.sampled_from(TEXT_FRAMINGS),
    kind=st.sampled_from(KINDS),
    value=st.sampled_from(NON_OBJECTS),
    data=st.data(),
)
def test_an_event_that_is_not_a_json_object_is_refused_naming_it(
    target: Target,
    scratch: Path,
    events: list[dict[str, Any]],
    how: str,
    kind: str,
    value: bytes,
    data: st.DataObject,
) -> None:
    text, spans = frame(events, how)
    k = data.draw(st.integers(0, len(events) - 1), label="event")
    # JSON Lines whose first line is an array read as a JSON array (``[]``: no events at all).
    assume(not (how.startswith("jsonl") and k == 0 and value.startswith(b"[")))
    start, end = spans[k]
    broken = text[:start] + value + text[end:]
    error = target.refuse(deliver(broken, kind, scratch))
    expect_index(error, k, how)
    if error.index == k and k > 0:
        assert isinstance(error, InvalidEventError) and error.path == "$"


@SOME
@given(events=streams(), how=st.sampled_from([*TEXT_FRAMINGS, "items"]), data=st.data())
def test_random_damage_to_the_bytes_either_lands_whole_or_is_refused_cleanly(
    target: Target, events: list[dict[str, Any]], how: str, data: st.DataObject
) -> None:
    """Flipped, deleted and inserted bytes anywhere: whatever the result, the file only ever
    gains whole batches, and a refusal is one library error."""
    damage = data.draw(DAMAGE, label="damage")
    if how == "items":
        texts = [json.dumps(e).encode() for e in events]
        k = data.draw(st.integers(0, 2**20), label="item") % len(texts)
        texts[k] = _damaged(texts[k], damage)
        target.attempt(texts)
    else:
        text, _ = frame(events, how)
        target.attempt(_damaged(text, damage))


#: Up to four changes to a text: where (an integer, taken modulo the text's length), which
#: (flip a byte, delete a few, insert some), and with what. Drawn whole, whatever the text:
#: what is drawn never depends on the text, so hypothesis sees the same draws for the same
#: choices whatever a stream holds.
DAMAGE = st.lists(
    st.tuples(
        st.integers(0, 2**20),
        st.sampled_from(["flip", "delete", "insert"]),
        st.integers(0, 255),
        st.integers(1, 8),
        st.binary(min_size=1, max_size=4)
        | st.sampled_from([b"{", b"}", b"[", b"]", b",", b'"', b"\\"]),
    ),
    min_size=1,
    max_size=4,
)


def _damaged(text: bytes, damage: list[tuple[int, str, int, int, bytes]]) -> bytes:
    out = bytearray(text)
    for where, how, byte, length, inserted in damage:
        at = where % len(out) if out else 0
        if how == "flip" and out:
            out[at] = byte
        elif how == "delete" and out:
            del out[at : at + length]
        else:
            out[at:at] = inserted
    return bytes(out)


@MANY
@given(garbage=st.binary(max_size=300) | st.text(max_size=300))
def test_garbage_is_refused_or_holds_nothing(target: Target, garbage: bytes | str) -> None:
    target.attempt(garbage)


@pytest.mark.parametrize(
    "source",
    [
        None,
        5,
        3.5,
        True,
        object(),
        {1, 2},
        [None],
        [5],
        [[]],
        [["a"]],
        [b"\xff"],
        ("x",),
        type("Unreadable", (), {"read": lambda self: 5})(),
    ],
    ids=lambda v: type(v).__name__,
)
def test_things_that_are_no_events_at_all_are_refused(target: Target, source: Any) -> None:
    target.refuse(source)


# --- dicts, pydantic and structs: wrong kinds, missing fields ----------------------------


def _official_classes() -> dict[str, type]:
    found = {}
    for cls in vars(core).values():
        if isinstance(cls, type) and issubclass(cls, core.BaseEvent) and cls is not core.BaseEvent:
            field = cls.model_fields.get("type")
            if field is not None and field.default is not None:
                found[getattr(field.default, "value", field.default)] = cls
    return found


OFFICIAL = _official_classes()


def required_fields(event_type: str) -> dict[str, type]:
    """Required fields of an event type whose kind is plainly str, list or dict, according to
    the official ``ag_ui.core`` models (an oracle independent of this library)."""
    cls = OFFICIAL.get(event_type)
    if cls is None:
        return {}
    out = {}
    for name, info in cls.model_fields.items():
        if name == "type" or not info.is_required():
            continue
        origin = getattr(info.annotation, "__origin__", info.annotation)
        kind = {str: str, list: list, dict: dict}.get(origin)  # type: ignore[call-overload]
        if kind is not None:
            out[info.alias or name] = kind
    return out


WRONG = {
    str: [1, 1.5, True, None, [], {}, ["x"], {"x": "y"}],
    list: [1, "x", True, None, {}],
    dict: [1, "x", True, None, []],
}


@MANY
@given(events=streams(), data=st.data())
def test_a_field_of_the_wrong_kind_is_refused_naming_index_type_and_path(
    target: Target, events: list[dict[str, Any]], data: st.DataObject
) -> None:
    candidates = [
        (i, f, kind) for i, e in enumerate(events) for f, kind in required_fields(e["type"]).items()
    ]
    assume(candidates)
    k, field, kind = data.draw(st.sampled_from(candidates), label="field")
    bad = data.draw(st.sampled_from(WRONG[kind]), label="value")
    events[k] = {**events[k], field: bad}
    with pytest.raises(Exception):  # the official model refuses it too  # noqa: B017
        OFFICIAL[events[k]["type"]].model_validate(events[k])
    error = target.refuse(events)
    assert isinstance(error, InvalidEventError)
    assert (error.index, error.event_type) == (k, events[k]["type"]), error
    assert error.path == f"$.{field}", error


@MANY
@given(events=streams(), data=st.data())
def test_a_missing_required_field_is_refused_naming_index_type_and_path(
    target: Target, events: list[dict[str, Any]], data: st.DataObject
) -> None:
    candidates = [(i, f) for i, e in enumerate(events) for f in required_fields(e["type"])]
    assume(candidates)
    k, field = data.draw(st.sampled_from(candidates), label="field")
    events[k] = {key: v for key, v in events[k].items() if key != field}
    error = target.refuse(events)
    assert isinstance(error, InvalidEventError)
    assert (error.index, error.event_type, error.path) == (k, events[k]["type"], f"$.{field}")


@SOME
@given(events=streams(), data=st.data(), value=st.sampled_from([math.nan, math.inf, -math.inf]))
def test_nan_and_infinities_in_dicts_are_refused_with_their_path(
    target: Target, events: list[dict[str, Any]], data: st.DataObject, value: float
) -> None:
    k = data.draw(st.integers(0, len(events) - 1), label="event")
    events[k] = {**events[k], "x-extra": {"list": [1, value]}}
    error = target.refuse(events)
    assert isinstance(error, InvalidEventError)
    assert (error.index, error.path) == (k, '$["x-extra"].list[1]'), error


@SOME
@given(
    events=streams(),
    data=st.data(),
    value=st.sampled_from([b"bytes", {1: "int key"}, {"k": {b"b": 1}}, object(), 1 + 2j]),
)
def test_values_json_cannot_hold_are_refused_with_their_path(
    target: Target, events: list[dict[str, Any]], data: st.DataObject, value: Any
) -> None:
    k = data.draw(st.integers(0, len(events) - 1), label="event")
    events[k] = {**events[k], "x-extra": value}
    error = target.refuse(events)
    assert isinstance(error, InvalidEventError) and error.index == k
    assert error.path.startswith('$["x-extra"]'), error


@SOME
@given(
    events=streams(),
    data=st.data(),
    value=st.sampled_from([5, "event", None, [], [{"type": "RAW"}], 2.5]),
)
def test_a_non_object_in_a_list_of_events_is_refused_naming_its_index(
    target: Target, events: list[dict[str, Any]], data: st.DataObject, value: Any
) -> None:
    k = data.draw(st.integers(0, len(events) - 1), label="event")
    events[k] = value
    error = target.refuse(events)
    assert isinstance(error, InvalidEventError) and (error.index, error.path) == (k, "$")


def to_official(event: dict[str, Any]) -> Any:
    return OFFICIAL[event["type"]].model_validate(event)


PYDANTIC_FIELDS = [
    (event_type, field)
    for event_type in sorted(OFFICIAL)
    for field, kind in required_fields(event_type).items()
    if kind is str
]

def test_official_pydantic_events_with_a_wrong_kind_are_refused_naming_the_field(
    target: Target,
) -> None:
    """``model_construct`` skips pydantic's validation (as a hand-built or buggy producer's
    event does): the store still refuses it, naming the field. Every required text field of
    every official event class, in turn."""
    started = to_official({"type": "RUN_STARTED", "threadId": "fz", "runId": "fz-pyd"})
    wrong = []
    for event_type, field in PYDANTIC_FIELDS:
        cls = OFFICIAL[event_type]
        values: dict[str, Any] = {}
        for name, info in cls.model_fields.items():
            if name != "type" and info.is_required():
                bad = (info.alias or name) == field
                values[name] = 12345 if bad else _valid(info.annotation)
        try:
            error = target.refuse([started, cls.model_construct(**values)])
        except Exception as e:
            wrong.append(f"{event_type}.{field}: {type(e).__name__}: {str(e)[:120]}")
            continue
        if not isinstance(error, InvalidEventError) or (error.index, error.path) != (
            1,
            f"$.{field}",
        ):
            wrong.append(f"{event_type}.{field}: {error!r}")
    assert wrong == [], "\n".join(wrong)
    assert len(PYDANTIC_FIELDS) > 30


def _valid(annotation: Any) -> Any:
    if typing.get_origin(annotation) is typing.Literal:
        return typing.get_args(annotation)[0]
    origin = typing.get_origin(annotation) or annotation
    return {str: "x", list: [], dict: {}}.get(origin, "x")


@SOME
@given(events=streams())
def test_the_librarys_own_structs_with_a_wrong_kind_are_refused(
    target: Target, events: list[dict[str, Any]]
) -> None:
    from agui_store.protocol import model

    broken = model.TextMessageContentEvent(message_id=7, delta=None)  # type: ignore[arg-type]
    error = target.refuse([*events[:1], broken])
    assert isinstance(error, InvalidEventError) and error.index == 1


# --- sequences, duplicates, threads -------------------------------------------------------


@MANY
@given(events=streams(), data=st.data(), official=st.booleans())
def test_an_illegal_event_is_refused_at_its_index(
    target: Target, events: list[dict[str, Any]], data: st.DataObject, official: bool
) -> None:
    p = data.draw(st.integers(1, len(events)), label="position")
    events.insert(p, {"type": "TEXT_MESSAGE_END", "messageId": "never-opened"})
    source: list[Any] = events
    if official:  # the same stream as official pydantic events
        try:
            source = [to_official(e) for e in events]
        except Exception:
            assume(False)
    error = target.refuse(source)
    assert isinstance(error, SequenceError)
    assert (error.index, error.event_type) == (p, "TEXT_MESSAGE_END"), error


@SOME
@given(events=streams(max_runs=1), again=streams(max_runs=1))
def test_a_run_id_recorded_twice_in_one_batch_is_refused(
    target: Target, events: list[dict[str, Any]], again: list[dict[str, Any]]
) -> None:
    assume(
        events[-1]["type"] in ("RUN_FINISHED", "RUN_ERROR") and again[0]["type"] == "RUN_STARTED"
    )
    run_id = events[0]["runId"]
    second = [
        {**e, "runId": run_id} if e["type"] in ("RUN_STARTED", "RUN_FINISHED") else e for e in again
    ]
    error = target.refuse(events + second)
    assert isinstance(error, InvalidEventError)
    assert (error.index, error.path) == (len(events), "$.runId"), error


@SOME
@given(events=streams())
def test_a_run_id_already_in_the_file_is_refused(
    target: Target, events: list[dict[str, Any]]
) -> None:
    target.attempt(events)  # lands (a legal stream)
    error = target.refuse(events)
    assert isinstance(error, InvalidEventError) and (error.index, error.path) == (0, "$.runId")


@SOME
@given(events=streams(max_runs=2), data=st.data())
def test_an_event_naming_another_thread_is_refused(
    target: Target, events: list[dict[str, Any]], data: st.DataObject
) -> None:
    starts = [i for i, e in enumerate(events) if e["type"] == "RUN_STARTED"]
    assume(len(starts) > 1)
    k = data.draw(st.sampled_from(starts[1:]), label="start")
    events[k] = {**events[k], "threadId": "somewhere-else"}
    error = target.refuse(events)
    assert isinstance(error, InvalidEventError)
    assert (error.index, error.event_type, error.path) == (k, "RUN_STARTED", "$.threadId")
    error = target.refuse(events[:1], thread_id="not-fz")
    assert isinstance(error, InvalidEventError) and (error.index, error.path) == (0, "$.threadId")


def test_an_input_naming_another_thread_is_refused(target: Target) -> None:
    started = {"type": "RUN_STARTED", "threadId": "fz", "runId": "fz-input"}
    error = target.refuse(
        [started],
        input={
            "threadId": "other",
            "runId": "fz-input",
            "messages": [],
            "tools": [],
            "context": [],
        },
    )
    assert isinstance(error, InvalidEventError) and error.path == "input.threadId"


def test_an_invalid_branch_name_refuses_the_whole_batch(target: Target) -> None:
    started = {"type": "RUN_STARTED", "threadId": "fz", "runId": "fz-branch"}
    target.refuse([started], branch="no spaces allowed")
    target.refuse([started], branch="main")


# --- huge and deep ------------------------------------------------------------------------


def nested_lists(depth: int) -> list[Any]:
    root: list[Any] = []
    current = root
    for _ in range(depth - 1):
        inner: list[Any] = []
        current.append(inner)
        current = inner
    return root


def brackets(depth: int) -> str:
    return "[" * depth + "]" * depth


def deep_event_text(depth: int) -> str:
    return '{"type":"CUSTOM","name":"deep","value":' + brackets(depth) + "}"


STARTED = '{"type":"RUN_STARTED","threadId":"fz","runId":"fz-deep"}'


@pytest.mark.parametrize(
    "how",
    [
        "bytes of brackets",
        "str of brackets",
        "object brackets",
        "one event",
        "array",
        "json lines",
        "sse",
        "list item",
        "dict value",
        "input",
    ],
)
def test_a_million_brackets_are_refused_quickly_on_every_path(target: Target, how: str) -> None:
    deep = deep_event_text(MILLION)
    sources = {
        "bytes of brackets": lambda: b"[" * MILLION,
        "str of brackets": lambda: "[" * MILLION + "]" * MILLION,
        "object brackets": lambda: '{"a":' * MILLION,
        "one event": lambda: deep,
        "array": lambda: "[" + STARTED + "," + deep + "]",
        "json lines": lambda: STARTED + "\n" + deep + "\n",
        "sse": lambda: f"data: {STARTED}\n\ndata: {deep}\n\n",
        "list item": lambda: [json.loads(STARTED), deep],
        "dict value": lambda: [
            json.loads(STARTED),
            {"type": "CUSTOM", "name": "deep", "value": nested_lists(MILLION)},
        ],
        "input": lambda: json.loads(STARTED),
    }
    options = {"input": brackets(MILLION)} if how == "input" else {}
    error = target.refuse(sources[how](), seconds=30, **options)
    assert "nested" in str(error) or "deep" in str(error), error


def test_a_million_deep_value_in_an_official_pydantic_event_is_refused(target: Target) -> None:
    event = core.CustomEvent.model_construct(
        type=core.EventType.CUSTOM, name="deep", value=nested_lists(MILLION)
    )
    error = target.refuse([to_official(json.loads(STARTED)), event], seconds=30)
    assert isinstance(error, InvalidEventError) and error.index == 1


@pytest.mark.parametrize(
    "depth",
    [
        200,
        pytest.param(300),
        pytest.param(1000),
    ],
)
def test_a_validly_built_pydantic_event_nested_beyond_the_limit_is_refused(
    target: Target, depth: int
) -> None:
    """Built through pydantic's own validation, so any producer can hand it over."""
    event = core.CustomEvent(name="deep", value=nested_lists(depth))
    error = target.refuse([to_official(json.loads(STARTED)), event])
    assert isinstance(error, InvalidEventError)
    assert (error.index, error.event_type) == (1, "CUSTOM"), error


def test_the_default_limits_are_documented_and_applied(tmp_path: Path) -> None:
    assert ingest.DEFAULT_MAX_EVENT_BYTES == 8 * 1024 * 1024
    assert ingest.DEFAULT_MAX_DEPTH == 64
    t = make_target(tmp_path / "defaults.db")
    try:
        assert (t.store.max_event_bytes, t.store.max_depth) == (8 * 1024 * 1024, 64)
        # Depth: the event object is level 1; 64 levels land, 65 do not.
        at_limit = {"type": "CUSTOM", "name": "d", "value": nested_lists(63)}
        over = {"type": "CUSTOM", "name": "d", "value": nested_lists(64)}
        error = t.refuse([{"type": "RUN_STARTED", "threadId": "fz", "runId": "d1"}, over])
        assert isinstance(error, InvalidEventError) and error.index == 1
        assert "64" in str(error) and error.path.startswith("$.value[0]")
        t.attempt([{"type": "RUN_STARTED", "threadId": "fz", "runId": "d1"}, at_limit])
        # Size: 8 MiB of JSON text lands, one byte more does not.
        pad = '{"type":"CUSTOM","name":"s","value":"'
        limit = ingest.DEFAULT_MAX_EVENT_BYTES
        fits = pad + "x" * (limit - len(pad) - 2) + '"}'
        assert len(fits.encode()) == limit
        t.attempt([STARTED.replace("fz-deep", "s1"), fits])
        too_big = pad + "x" * (limit - len(pad) - 1) + '"}'
        error = t.refuse([STARTED.replace("fz-deep", "s2"), too_big])
        assert isinstance(error, InvalidEventError) and error.index == 1
        assert str(limit) in str(error)
        error = t.refuse({"type": "CUSTOM", "name": "s", "value": "x" * limit}, thread_id="fz")
        assert str(limit) in str(error) and error.event_type == "CUSTOM"
    finally:
        t.store.close()


@pytest.mark.parametrize("kind", ["dict", "str", "bytes", "jsonl", "sse", "pydantic"])
def test_custom_limits_are_exact_on_every_path(tight: Target, kind: str) -> None:
    pad = '{"type":"CUSTOM","name":"s","value":"'

    def sized(n: int) -> str:
        return pad + "x" * (n - len(pad) - 2) + '"}'

    def as_kind(event: str, run: str) -> Any:
        started = STARTED.replace("fz-deep", run)
        if kind == "dict":
            return [json.loads(started), json.loads(event)]
        if kind == "pydantic":
            return [to_official(json.loads(started)), to_official(json.loads(event))]
        if kind == "jsonl":
            return f"{started}\n{event}\n"
        if kind == "sse":
            return f"data: {started}\n\ndata: {event}\n\n"
        text = f"[{started},{event}]"
        return text.encode() if kind == "bytes" else text

    tight.attempt(as_kind(sized(SMALL_LIMIT), f"fits-{kind}"))
    assert tight.store.get_run(f"fits-{kind}") is not None
    error = tight.refuse(as_kind(sized(SMALL_LIMIT + 1), f"over-{kind}"))
    assert isinstance(error, InvalidEventError) and error.index == 1
    assert str(SMALL_LIMIT) in str(error)
    depth_ok = '{"type":"CUSTOM","name":"d","value":' + brackets(SMALL_DEPTH - 1) + "}"
    tight.attempt(as_kind(depth_ok, f"deep-ok-{kind}"))
    depth_over = '{"type":"CUSTOM","name":"d","value":' + brackets(SMALL_DEPTH) + "}"
    error = tight.refuse(as_kind(depth_over, f"deep-over-{kind}"))
    assert isinstance(error, InvalidEventError) and error.index == 1
    assert str(SMALL_DEPTH) in str(error)
    assert error.path == "$.value" + "[0]" * (SMALL_DEPTH - 1), error.path


def test_custom_limits_apply_to_the_recorded_input_too(tight: Target) -> None:
    started = json.loads(STARTED.replace("fz-deep", "input-limits"))
    big = {
        "threadId": "fz",
        "runId": "input-limits",
        "messages": [],
        "tools": [],
        "context": [],
        "state": {"blob": "x" * SMALL_LIMIT},
    }
    error = tight.refuse([started], input=big)
    assert str(SMALL_LIMIT) in str(error)
    deep = {**big, "state": {"deep": nested_lists(SMALL_DEPTH)}}
    error = tight.refuse([started], input=deep)
    assert str(SMALL_DEPTH) in str(error)


def test_a_huge_run_id_is_refused_with_a_short_message(target: Target) -> None:
    run_id = "r" * 1_000_000
    target.attempt(
        [
            {"type": "RUN_STARTED", "threadId": "fz", "runId": run_id},
            {"type": "RUN_FINISHED", "threadId": "fz", "runId": run_id},
        ]
    )
    target.refuse([{"type": "RUN_STARTED", "threadId": "fz", "runId": run_id}])


@pytest.mark.parametrize(
    "source",
    [
        b'[{"\x80":\x00}]',
        [
            {"type": "RUN_STARTED", "threadId": "fz", "runId": "fz-key"},
            {"type": "CUSTOM", "name": "n", "value": {"\ud800": math.nan}},
        ],
    ],
    ids=["invalid UTF-8 key in an array", "lone surrogate key in a dict"],
)
def test_an_error_under_a_key_that_is_not_valid_unicode_still_names_its_place(
    target: Target, source: Any
) -> None:
    error = target.refuse(source)
    assert isinstance(error, InvalidEventError) and error.path.startswith("$")


# --- strings SQLite cannot store ----------------------------------------------------------


@pytest.mark.parametrize("held", ["x\ud800", "x\x00y"], ids=["a lone surrogate", "a NUL"])
@pytest.mark.parametrize("where", ["threadId", "runId", "parentRunId"])
def test_an_id_holding_what_a_backend_cannot_store_is_refused_naming_its_path(
    target: Target, where: str, held: str
) -> None:
    """JSON may escape a lone surrogate (``"\\ud800"``), which no text column holds, or a NUL,
    which PostgreSQL's does not: refused on every backend, so any store copies to any other."""
    event = {"type": "RUN_STARTED", "threadId": "fz", "runId": "fz-surrogate", where: held}
    error = target.refuse([event])
    assert isinstance(error, InvalidEventError)
    assert (error.index, error.path) == (0, f"$.{where}"), error
    error = target.refuse(json.dumps([event]))  # the same, escaped in JSON text
    assert isinstance(error, InvalidEventError) and error.path == f"$.{where}"


@pytest.mark.parametrize("held", ["x\ud800", "x\x00y"], ids=["a lone surrogate", "a NUL"])
@pytest.mark.parametrize("option", ["thread_id", "parent", "branch", "scope"])
def test_an_argument_holding_what_a_backend_cannot_store_is_refused(
    target: Target, option: str, held: str
) -> None:
    event = {"type": "RUN_STARTED", "threadId": "fz", "runId": "fz-arg"}
    source = [{"type": "RUN_ERROR", "message": "x"}] if option == "thread_id" else [event]
    target.refuse(source, **{option: held})


def test_an_escaped_lone_surrogate_reads_the_same_in_every_framing(
    target: Target, tmp_path: Path
) -> None:
    """JavaScript producers split emoji into lone surrogates, escaped in JSON: the codec
    accepts them, and must do so whatever the framing."""
    for how in TEXT_FRAMINGS:
        run_id = f"fz-split-{how}"
        events = [
            {"type": "RUN_STARTED", "threadId": "fz", "runId": run_id},
            {"type": "TEXT_MESSAGE_START", "messageId": "m", "role": "assistant"},
            {"type": "TEXT_MESSAGE_CONTENT", "messageId": "m", "delta": "half HALF"},
            {"type": "TEXT_MESSAGE_END", "messageId": "m"},
        ]
        # JSON's escape of the lone high surrogate, as JSON.stringify writes it.
        text = frame(events, how)[0].replace(b"HALF", b"\\ud83d")
        assert target.attempt(text) is None, how
        events[2]["delta"] = "half \ud83d"
        assert target.store.events(run_id, thread_id="fz") == events
