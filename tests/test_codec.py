"""The ingest codec: every way a user hands events to ``append`` reads back JSON-equal."""

from __future__ import annotations

import datetime
import enum
import functools
import io
import json
import math
import string
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from agui_store.codec import ingest
from agui_store.codec.ingest import IncomingEvent, parse_events
from agui_store.codec.sse import SSEParser, encode_sse
from agui_store.errors import InvalidEventError
from agui_store.protocol import model, validate
from tests.conftest import fixture_params
from tests.strategies import json_values, legal_streams

# ---------------------------------------------------------------------------------------------
# Encoders: the same events in every form a user may hand over
# ---------------------------------------------------------------------------------------------


def as_array_text(events: list[dict[str, Any]]) -> str:
    return json.dumps(events, ensure_ascii=False, indent=2)


def as_jsonl(events: list[dict[str, Any]], newline: str = "\n") -> str:
    return newline.join(json.dumps(e, ensure_ascii=False) for e in events) + newline


def as_sse(events: list[dict[str, Any]], newline: str = "\r\n") -> str:
    """SSE with comments, ignored fields and pretty-printed (multi-line) data."""
    out = [f": keep-alive{newline}", f"retry: 1000{newline}"]
    for i, e in enumerate(events):
        out.append(f"event: agui{newline}id: {i}{newline}")
        for line in json.dumps(e, ensure_ascii=False, indent=1).split("\n"):
            out.append(f"data: {line}{newline}")
        out.append(newline)
    return "".join(out)


def ingest_paths(tmp_path: Path) -> dict[str, Callable[[list[dict[str, Any]]], Any]]:
    counter = iter(range(10**9))

    def to_file(events: list[dict[str, Any]]) -> Path:
        path = tmp_path / f"events-{next(counter)}.sse"
        path.write_bytes(as_sse(events, "\n").encode("utf-8"))
        return path

    return {
        "dicts": lambda events: events,
        "tuple": lambda events: tuple(events),
        "iterator": lambda events: iter(events),
        "array-text": as_array_text,
        "array-bytes-bom": lambda events: b"\xef\xbb\xbf" + as_array_text(events).encode(),
        "jsonl": as_jsonl,
        "jsonl-crlf-bytes": lambda events: as_jsonl(events, "\r\n").encode(),
        "sse-crlf": as_sse,
        "sse-cr-bytes": lambda events: as_sse(events, "\r").encode(),
        "sse-lf-binary-file": lambda events: io.BytesIO(as_sse(events, "\n").encode()),
        "jsonl-text-file": lambda events: io.StringIO(as_jsonl(events)),
        "path": to_file,
        "json-strings": lambda events: [json.dumps(e) for e in events],
    }


@functools.cache
def event_adapter() -> Any:
    """``TypeAdapter(ag_ui.core.Event)``, built once (building it takes a while)."""
    pydantic = pytest.importorskip("pydantic")
    ag_ui_core = pytest.importorskip("ag_ui.core")
    return pydantic.TypeAdapter(ag_ui_core.Event)


def check_round_trip(parsed: list[IncomingEvent], events: list[dict[str, Any]]) -> None:
    assert [e.data for e in parsed] == events
    for incoming, original in zip(parsed, events, strict=True):
        assert isinstance(incoming.data, dict)
        assert isinstance(incoming.raw, bytes)
        assert ingest.decode(incoming.raw) == original
        assert json.loads(incoming.raw) == original
        assert incoming.type == original["type"]


@pytest.mark.parametrize("events", fixture_params())
def test_every_recorded_stream_reads_back_equal_through_every_ingest_path(
    events: list[dict[str, Any]], tmp_path: Path
) -> None:
    for make in ingest_paths(tmp_path).values():
        check_round_trip(parse_events(make(events)), events)


@pytest.mark.parametrize("events", fixture_params())
def test_every_recorded_stream_reads_back_equal_from_official_pydantic_events(
    events: list[dict[str, Any]],
) -> None:
    adapter = event_adapter()
    models = [adapter.validate_python(e) for e in events]
    check_round_trip(parse_events(models), events)
    check_round_trip([parse_events(models[0])[0]], events[:1])


@pytest.mark.parametrize("events", fixture_params())
def test_every_recorded_stream_reads_back_equal_from_the_model_structs(
    events: list[dict[str, Any]],
) -> None:
    structs = [validate.from_dict(e) for e in events]
    check_round_trip(parse_events(structs), events)
    check_round_trip(parse_events(structs[0]), events[:1])


@pytest.mark.parametrize("events", fixture_params())
def test_raw_is_the_producers_bytes_verbatim_for_text_input(events: list[dict[str, Any]]) -> None:
    pretty = [json.dumps(e, indent=3, ensure_ascii=True) for e in events]
    array = "[\n" + ",\n".join(pretty) + "\n]"
    assert [e.raw.decode() for e in parse_events(array)] == pretty
    sse = "".join("data: " + p.replace("\n", "\ndata: ") + "\n\n" for p in pretty)
    assert [e.raw.decode() for e in parse_events(sse)] == pretty
    lines = [json.dumps(e, separators=(", ", " : ")) for e in events]
    assert [e.raw.decode() for e in parse_events("\n".join(lines))] == lines


# ---------------------------------------------------------------------------------------------
# Properties over generated streams (with unknown fields and unknown event types)
# ---------------------------------------------------------------------------------------------


@st.composite
def streams_with_extras(draw: st.DrawFn) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for ev in draw(legal_streams(max_runs=2, max_steps=8)):
        if draw(st.integers(0, 3)) == 0:
            ev = {
                **ev,
                **draw(
                    st.dictionaries(st.sampled_from(["xNew", "zzFuture"]), json_values, max_size=2)
                ),
            }
        out.append(ev)
        if draw(st.integers(0, 6)) == 0:
            name = draw(st.text(alphabet=string.ascii_uppercase + "_", min_size=1, max_size=8))
            out.append({"type": f"FUTURE_{name}", "payload": draw(json_values)})
    return out


@settings(
    max_examples=min(settings.default.max_examples, 150),
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
@given(events=streams_with_extras())
def test_generated_events_read_back_equal_through_every_ingest_path(
    events: list[dict[str, Any]], tmp_path: Path
) -> None:
    for make in ingest_paths(tmp_path).values():
        check_round_trip(parse_events(make(events)), events)


@settings(max_examples=min(settings.default.max_examples, 150))
@given(streams_with_extras())
def test_generated_events_read_back_equal_from_official_pydantic_events(
    events: list[dict[str, Any]],
) -> None:
    adapter = event_adapter()
    known = [e for e in events if e["type"] in model.EVENT_TYPES]
    models = [adapter.validate_python(e) for e in known]
    dumped = [m.model_dump(mode="json", by_alias=True) for m in models]
    assert dumped == known  # the SDK keeps unknown fields and drops nothing
    mixed: list[Any] = [
        m if i % 2 else e for i, (m, e) in enumerate(zip(models, known, strict=True))
    ]
    check_round_trip(parse_events(mixed), known)


@given(json_values)
def test_decode_agrees_with_json_loads(value: Any) -> None:
    for text in (json.dumps(value), json.dumps(value, ensure_ascii=False, indent=1)):
        assert ingest.decode(text) == json.loads(text)
        assert ingest.decode(text.encode()) == json.loads(text)
    assert ingest.decode(ingest.encode(value)) == value


@given(st.lists(json_values))
def test_decode_many_equals_decoding_each(values: list[Any]) -> None:
    payloads = [ingest.encode(v) for v in values]
    assert ingest.decode_many(payloads) == [ingest.decode(p) for p in payloads] == values


@given(st.dictionaries(st.text(max_size=4), json_values, max_size=6), st.randoms())
def test_canonical_bytes_ignore_key_order(obj: dict[str, Any], rnd: Any) -> None:
    def shuffled(value: Any) -> Any:
        if isinstance(value, dict):
            items = list(value.items())
            rnd.shuffle(items)
            return {k: shuffled(v) for k, v in items}
        if isinstance(value, list):
            return [shuffled(v) for v in value]
        return value

    canonical = ingest.canonical_bytes(obj)
    assert ingest.canonical_bytes(shuffled(obj)) == canonical
    assert json.loads(canonical) == obj


def test_canonical_bytes_sort_keys_and_use_compact_separators() -> None:
    assert ingest.canonical_bytes({"b": [1, {"d": 1, "c": 2}], "a": "é"}) == (
        '{"a":"é","b":[1,{"c":2,"d":1}]}'.encode()
    )
    struct = model.TextMessageContentEvent(message_id="m", delta="x")
    assert ingest.canonical_bytes(struct) == ingest.canonical_bytes(validate.to_dict(struct))


@settings(max_examples=300)
@given(st.binary(max_size=200) | st.text(max_size=200).map(str.encode))
def test_arbitrary_bytes_give_events_or_an_invalid_event_error_never_a_crash(data: bytes) -> None:
    for source in (data, b"[" + data, b"data: " + data, b'{"type":' + data):
        try:
            events = parse_events(source)
        except InvalidEventError as exc:
            assert exc.index is None or exc.index >= 0
            assert exc.path.startswith("$")
        else:
            for e in events:
                assert isinstance(e.data, dict)
                assert ingest.decode(e.raw) == e.data


@given(st.data())
def test_a_truncated_stream_fails_at_the_event_where_it_was_cut(data: st.DataObject) -> None:
    events = data.draw(legal_streams(max_runs=1, max_steps=6))
    text = json.dumps(events)
    cut = data.draw(st.integers(1, len(text) - 1))
    with pytest.raises(InvalidEventError) as info:
        parse_events(text[:cut])
    offsets = [len(json.dumps(events[:i])) - 1 for i in range(1, len(events) + 1)]
    expected = (
        next(i for i, end in enumerate(offsets) if cut <= end + 1) if cut < len(text) - 1 else None
    )
    assert info.value.index is not None
    if expected is not None:
        # A cut on a separating comma may name the event before it; a cut after an event's
        # closing brace (with or without its comma) may name the event that never came.
        allowed = {expected, expected - 1}
        if cut >= offsets[expected]:
            allowed.add(expected + 1)
        assert info.value.index in allowed
    assert "malformed JSON" in info.value.reason or "truncated" in info.value.reason


# ---------------------------------------------------------------------------------------------
# Formats
# ---------------------------------------------------------------------------------------------


E1 = {"type": "RUN_STARTED", "threadId": "t", "runId": "r"}
E2 = {"type": "TEXT_MESSAGE_START", "messageId": "m"}


def datas(source: Any, **kwargs: Any) -> list[dict[str, Any]]:
    return [e.data for e in parse_events(source, **kwargs)]


@pytest.mark.parametrize(
    "text",
    [
        '{"type":"RUN_STARTED","threadId":"t","runId":"r"}',
        '  \n{\n  "type": "RUN_STARTED",\n  "threadId": "t",\n  "runId": "r"\n}\n',
        '\ufeff{"type":"RUN_STARTED","threadId":"t","runId":"r"}',
    ],
    ids=["compact", "pretty", "bom"],
)
def test_one_json_object_is_one_event(text: str) -> None:
    assert datas(text) == [E1]
    assert datas(text.encode("utf-8")) == [E1]


def test_json_lines_skip_blank_lines_and_accept_crlf_and_cr() -> None:
    text = (
        '\n{"type":"RUN_STARTED","threadId":"t","runId":"r"}\r\n\r\n  \n'
        '{"type":"TEXT_MESSAGE_START","messageId":"m"}\r'
    )
    assert datas(text) == [E1, E2]


def test_sse_follows_the_event_stream_rules() -> None:
    text = (
        ": a comment\n"
        "event: message\n"
        'data:{"type":"RUN_STARTED",\n'  # no space after the colon
        'data: "threadId":"t","runId":"r"}\n'
        "id: 1\n"
        "retry: 10\n"
        "unknown: field\n"
        "\n\n\n"
        'data: {"type":"TEXT_MESSAGE_START","messageId":"m"}'  # last record, no blank line
    )
    parsed = parse_events(text)
    assert [e.data for e in parsed] == [E1, E2]
    assert parsed[0].raw == b'{"type":"RUN_STARTED",\n"threadId":"t","runId":"r"}'


def test_sse_multi_line_data_is_joined_with_line_feeds_whatever_the_line_endings() -> None:
    for newline in ("\n", "\r\n", "\r"):
        text = newline.join(
            ['data: {"type":', 'data:  "RUN_STARTED",', 'data: "threadId":"t","runId":"r"}', "", ""]
        )
        parsed = parse_events(text)
        assert parsed[0].data == E1
        assert parsed[0].raw == b'{"type":\n "RUN_STARTED",\n"threadId":"t","runId":"r"}'


def test_an_sse_record_with_empty_data_is_refused_as_the_client_refuses_it() -> None:
    with pytest.raises(InvalidEventError, match=r"SSE record 1 .*line 3.*empty") as info:
        parse_events('data: {"type":"X"}\n\ndata:\n\n')
    assert info.value.index == 1


@pytest.mark.parametrize(
    "source", ["", "   \n\t", b"", "\ufeff", "[]", ": only a comment\n\n", io.BytesIO(b"")]
)
def test_empty_input_is_an_empty_batch(source: Any) -> None:
    assert parse_events(source) == []


def test_a_mixed_list_of_dicts_structs_models_and_json_strings_is_read_in_order() -> None:
    ag_ui_core = pytest.importorskip("ag_ui.core")
    items: list[Any] = [
        E1,
        model.TextMessageStartEvent(message_id="m"),
        ag_ui_core.TextMessageContentEvent(message_id="m", delta="hi"),
        '{"type":"TEXT_MESSAGE_END","messageId":"m"}',
        b'{"type":"RUN_FINISHED","threadId":"t","runId":"r"}',
    ]
    assert [e.data for e in parse_events(items)] == [
        E1,
        E2,
        {"type": "TEXT_MESSAGE_CONTENT", "messageId": "m", "delta": "hi"},
        {"type": "TEXT_MESSAGE_END", "messageId": "m"},
        {"type": "RUN_FINISHED", "threadId": "t", "runId": "r"},
    ]


def test_a_generator_and_a_mapping_are_read() -> None:
    assert datas(e for e in [E1, E2]) == [E1, E2]
    from types import MappingProxyType

    assert datas(MappingProxyType(E1)) == [E1]


def test_a_pydantic_model_is_dumped_by_alias_not_by_attribute_name() -> None:
    ag_ui_core = pytest.importorskip("ag_ui.core")
    ev = ag_ui_core.ToolCallStartEvent(tool_call_id="c", tool_call_name="f")
    assert datas(ev) == [{"type": "TOOL_CALL_START", "toolCallId": "c", "toolCallName": "f"}]


@pytest.mark.parametrize(
    "source", [42, None, 1.5, object()], ids=["int", "none", "float", "object"]
)
def test_a_source_that_holds_no_events_is_refused(source: Any) -> None:
    with pytest.raises(InvalidEventError, match="cannot read events"):
        parse_events(source)


def test_text_that_is_neither_json_nor_sse_is_refused() -> None:
    with pytest.raises(
        InvalidEventError, match="not a JSON object or array, JSON Lines or SSE"
    ) as info:
        parse_events("hello world")
    assert info.value.index is None


@pytest.mark.parametrize(
    ("source", "index", "kind"),
    [
        ('[{"type":"A"}, 5]', 1, "an integer"),
        ('[{"type":"A"}, [{"type":"B"}]]', 1, "an array"),
        ('{"type":"A"}\n"B"', 1, "a string"),
        ('data: {"type":"A"}\n\ndata: null\n\n', 1, "null"),
        ([{"type": "A"}, 5], 1, "an integer"),
        ([{"type": "A"}, "[]"], 1, "an array"),
    ],
)
def test_an_event_that_is_not_an_object_is_refused_with_its_index(
    source: Any, index: int, kind: str
) -> None:
    with pytest.raises(InvalidEventError, match=f"must be a JSON object, got {kind}") as info:
        parse_events(source)
    assert (info.value.index, info.value.path) == (index, "$")


# ---------------------------------------------------------------------------------------------
# JSON corner cases
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "fragment",
    [
        "123456789012345678901234567890",
        "-123456789012345678901234567890",
        "18446744073709551616",
        "-0.0",
        "1e308",
        "5e-324",
        "1E2",
        "1e-400",
        '"\\ud83d\\ude00"',
        '"\\ud83d"',
        '"x\\udc00y"',
        '"\\u2028\\u0000"',
        '"\u2028é😀"',
        "[]",
        "{}",
    ],
)
def test_json_values_read_back_as_json_loads_reads_them(fragment: str) -> None:
    text = '{"type":"CUSTOM","name":"n","value":' + fragment + "}"
    [parsed] = parse_events(text)
    expected = json.loads(text)
    assert parsed.data == expected
    assert parsed.raw == text.encode("utf-8")
    assert ingest.decode(parsed.raw) == expected
    value = parsed.data["value"]
    if isinstance(value, float):
        assert math.copysign(1, value) == math.copysign(1, expected["value"])  # -0.0 stays -0.0
    # and the compact re-encoding of the decoded event reads back equal too
    assert ingest.decode(ingest.encode(parsed.data)) == expected
    [again] = parse_events(parsed.data)
    assert again.data == expected


def test_integers_json_loads_cannot_read_are_refused_with_their_path() -> None:
    digits = "9" * 5000  # over Python's int-to-string limit (4300 digits)
    for source in ('[{"type":"A"}, {"type":"CUSTOM","value":[1, ' + digits + "]}]",):
        with pytest.raises(InvalidEventError, match="5000 digits") as info:
            parse_events(source)
        assert (info.value.index, info.value.path) == (1, "$.value[1]")
    with pytest.raises(InvalidEventError) as info:
        parse_events([{"type": "A"}, {"type": "CUSTOM", "value": 10**5000}])
    assert (info.value.index, info.value.event_type) == (1, "CUSTOM")


def test_duplicate_keys_read_back_last_one_wins_as_json_parse_does() -> None:
    text = '{"type":"CUSTOM","name":"a","name":"b","value":1}'
    [parsed] = parse_events(text)
    assert parsed.data == json.loads(text) == {"type": "CUSTOM", "name": "b", "value": 1}
    assert parsed.raw == text.encode()  # the producer's bytes are kept as they were


@pytest.mark.parametrize("literal", ["NaN", "Infinity", "-Infinity", "1e400", "-1e400"])
def test_non_finite_numbers_in_text_are_refused_with_their_path(literal: str) -> None:
    text = '[{"type":"A"}, {"type":"CUSTOM","value":{"x":[1, ' + literal + "]}}]"
    with pytest.raises(InvalidEventError) as info:
        parse_events(text)
    assert info.value.index == 1
    assert info.value.path in ("$.value.x[1]", "$.value.x")


@pytest.mark.parametrize("number", [math.nan, math.inf, -math.inf])
def test_non_finite_floats_in_dicts_are_refused_with_their_path(number: float) -> None:
    with pytest.raises(InvalidEventError, match="not a JSON number") as info:
        parse_events([E1, {"type": "STATE_SNAPSHOT", "snapshot": {"a": [0, number]}}])
    assert (info.value.index, info.value.event_type, info.value.path) == (
        1,
        "STATE_SNAPSHOT",
        "$.snapshot.a[1]",
    )


class Color(enum.Enum):
    RED = 1


class Role(str, enum.Enum):
    USER = "user"


@pytest.mark.parametrize(
    ("value", "match"),
    [
        (datetime.datetime(2026, 1, 1), "datetime is not a JSON value"),
        (b"bytes", "bytes is not a JSON value"),
        ({1, 2}, "set is not a JSON value"),
        (Color.RED, "Color is not a JSON value"),
        ({1: "a"}, "object key 1 is an integer"),
        (object(), "object is not a JSON value"),
    ],
    ids=["datetime", "bytes", "set", "enum", "int-key", "object"],
)
def test_python_values_that_are_not_json_are_refused_with_their_path(
    value: Any, match: str
) -> None:
    with pytest.raises(InvalidEventError, match=match) as info:
        parse_events({"type": "CUSTOM", "name": "n", "value": {"v": value}})
    assert info.value.path == "$.value.v"


def test_tuples_and_string_enums_in_dicts_are_json() -> None:
    [parsed] = parse_events({"type": "CUSTOM", "name": "n", "value": (1, Role.USER)})
    assert parsed.data == {"type": "CUSTOM", "name": "n", "value": [1, "user"]}
    assert parsed.raw == b'{"type":"CUSTOM","name":"n","value":[1,"user"]}'


def test_lone_surrogates_in_dicts_are_written_escaped() -> None:
    [parsed] = parse_events({"type": "TEXT_MESSAGE_CONTENT", "messageId": "m", "delta": "\ud83d"})
    assert parsed.raw == b'{"type":"TEXT_MESSAGE_CONTENT","messageId":"m","delta":"\\ud83d"}'
    assert parsed.data["delta"] == "\ud83d" == json.loads(parsed.raw)["delta"]
    assert ingest.encode({"a": "\udc00"}) == b'{"a":"\\udc00"}'
    assert ingest.canonical_bytes({"b": "\udc00", "a": 1}) == b'{"a":1,"b":"\\udc00"}'


@pytest.mark.parametrize(
    "data",
    [
        b'[{"type":"A"}, {"type":"B","x":"\xff"}]',
        b'[{"type":"A"}, {"type":"B","x":"\xed\xa0\x80"}]',  # a surrogate encoded as UTF-8
        b'[{"type":"A"}, {"type":"B","x":"\xc3"}]',
    ],
    ids=["ff", "encoded-surrogate", "truncated-sequence"],
)
def test_invalid_utf8_is_refused_with_the_event_index(data: bytes) -> None:
    for source in (
        data,
        data[1:-1].replace(b", ", b"\n"),
        b"data: " + data[1:-1].replace(b", ", b"\n\ndata: "),
    ):
        with pytest.raises(InvalidEventError, match="invalid UTF-8") as info:
            parse_events(source)
        assert info.value.index == 1


def test_a_str_holding_a_lone_surrogate_character_is_refused() -> None:
    with pytest.raises(InvalidEventError, match="lone surrogate"):
        parse_events('{"type":"A","x":"\ud800"}')


def test_encode_refuses_nan_instead_of_writing_null() -> None:
    with pytest.raises(InvalidEventError, match="not a JSON number") as info:
        ingest.encode({"a": [1, math.nan]})
    assert info.value.path == "$.a[1]"
    assert ingest.encode({"a": None}) == b'{"a":null}'


def test_decode_refuses_what_is_not_json_with_a_clear_error() -> None:
    for bad, match in [
        (b'{"a":', "malformed JSON at line 1, column 6"),
        (b"NaN", "malformed JSON"),
        (b"[1e400]", "range"),
        (b'"\xff"', "invalid UTF-8"),
        (b"[" * 100_000, "nested too deeply"),
    ]:
        with pytest.raises(InvalidEventError, match=match):
            ingest.decode(bad)


# ---------------------------------------------------------------------------------------------
# Limits: size and depth
# ---------------------------------------------------------------------------------------------

HUGE = "x" * (2 * 1024 * 1024)


@pytest.mark.parametrize(
    "make",
    [
        lambda ev: [E1, ev],
        lambda ev: json.dumps([E1, ev]),
        lambda ev: as_jsonl([E1, ev]),
        lambda ev: as_sse([E1, ev]).encode(),
    ],
    ids=["dicts", "array", "jsonl", "sse"],
)
def test_an_event_over_max_event_bytes_is_refused_with_its_index(
    make: Callable[[Any], Any],
) -> None:
    ev = {"type": "TEXT_MESSAGE_CONTENT", "messageId": "m", "delta": HUGE}
    assert len(parse_events(make(ev))) == 2
    with pytest.raises(InvalidEventError, match="over the limit of 1048576") as info:
        parse_events(make(ev), max_event_bytes=1024 * 1024)
    assert info.value.index == 1


def test_a_single_oversized_json_document_is_refused_before_it_is_decoded() -> None:
    text = '{"type":"X",\n"v":"' + HUGE + '"}'
    with pytest.raises(InvalidEventError, match="over the limit") as info:
        parse_events(text, max_event_bytes=1000)
    assert info.value.index == 0


def nested(depth: int) -> str:
    """An event whose ``v`` nests ``depth - 1`` arrays (the event object is depth 1)."""
    return '{"type":"CUSTOM","name":"n","value":' + "[" * (depth - 1) + "]" * (depth - 1) + "}"


@pytest.mark.parametrize("max_depth", [3, 64, 200])
def test_nesting_up_to_max_depth_is_accepted_and_one_more_is_refused_with_its_path(
    max_depth: int,
) -> None:
    ok = nested(max_depth)
    assert len(parse_events(ok, max_depth=max_depth)) == 1
    assert len(parse_events(json.loads(ok), max_depth=max_depth)) == 1
    bad = nested(max_depth + 1)
    expected = "$.value" + "[0]" * (max_depth - 1)
    for source in (
        bad,
        f"[{ok}, {bad}]",
        f"{ok}\n{bad}",
        f"data: {ok}\n\ndata: {bad}\n\n",
        json.loads(bad),
    ):
        with pytest.raises(InvalidEventError, match=f"nested deeper than {max_depth}") as info:
            parse_events(source, max_depth=max_depth)
        assert info.value.path == expected
        assert info.value.index in (0, 1)


@pytest.mark.parametrize(
    "source",
    [
        "[" * 1_000_000,
        "[" * 1_000_000 + "]" * 1_000_000,
        '{"type":"X","v":' + "[" * 1_000_000,
        '[{"type":"A"},{"type":"X","v":' + '{"a":' * 1_000_000,
        '{"type":"A"}\n{"type":"X","v":' + "[" * 1_000_000,
        'data: {"type":"X","v":' + "[" * 1_000_000 + "\n\n",
        b'{"type":"X","v":"' + b"\\" * 1_000_001 + b'"}',
    ],
    ids=["open", "balanced", "object", "array-objects", "jsonl", "sse", "backslashes"],
)
def test_a_million_brackets_give_an_invalid_event_error_not_a_recursion_error(source: Any) -> None:
    with pytest.raises(InvalidEventError) as info:
        parse_events(source)
    assert info.value.index is not None or info.value.path == "$"


def test_a_million_nested_python_lists_give_an_invalid_event_error() -> None:
    value: list[Any] = []
    for _ in range(1_000_000):
        value = [value]
    with pytest.raises(InvalidEventError, match="nested deeper than 64") as info:
        parse_events({"type": "CUSTOM", "name": "n", "value": value})
    assert info.value.path == "$.value" + "[0]" * 63


@pytest.mark.parametrize(
    "text",
    [
        '{"type":"X","s":"[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[["}',
        '{"type":"X","s":"\\\\","t":"\\"[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[["}',
    ],
)
def test_brackets_inside_strings_do_not_count_as_nesting(text: str) -> None:
    assert datas(text) == [json.loads(text)]


# Characters JSON escapes (newline, quote, backslash, control) beside the letters an escape
# can hold after its backslash: the check cuts escapes before it counts.
tricky_text = st.text(alphabet='[]{}"\\/:,abfnrtu\n\x01', max_size=8)
tricky_values = st.recursive(
    st.none() | st.integers() | tricky_text,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(tricky_text, inner, max_size=3),
    max_leaves=15,
)


@given(json_values | tricky_values)
def test_an_event_text_is_refused_exactly_when_it_nests_deeper_than_the_limit(value: Any) -> None:
    def depth(v: Any) -> int:
        if isinstance(v, dict):
            return 1 + max((depth(x) for x in v.values()), default=0)
        if isinstance(v, list):
            return 1 + max((depth(x) for x in v), default=0)
        return 0

    event = {"type": "CUSTOM", "name": "n", "value": value}
    # The same event beside a long string (brackets, quotes and escapes inside): a text as
    # long as a request body, whose brackets the depth check counts otherwise than a short
    # one's. Without brackets in it, the count alone decides the shallow ones.
    texts = [ingest.encode([event])] + [
        ingest.encode([{**event, "pad": pad * 2_000}]) for pad in ('a[\\"{', 'a\\"/n')
    ]
    real = depth(event)
    for limit in range(1, real + 2):
        for text in texts:
            try:
                parse_events(text, max_depth=limit)
            except InvalidEventError as refused:
                assert real > limit, (limit, str(refused))
            else:
                assert real <= limit, limit


# ---------------------------------------------------------------------------------------------
# Errors name where they are
# ---------------------------------------------------------------------------------------------


def test_malformed_json_lines_name_the_record_and_the_line() -> None:
    text = '{"type":"A"}\n\n{"type":"B"}\n{"type":"C",}\n'
    with pytest.raises(InvalidEventError, match=r"JSON Lines line 4: malformed JSON") as info:
        parse_events(text)
    assert info.value.index == 2


def test_malformed_sse_data_names_the_record_and_the_line() -> None:
    text = 'data: {"type":"A"}\r\n\r\n: note\r\ndata: {"type":"B",\r\ndata: "x": tru}\r\n\r\n'
    with pytest.raises(
        InvalidEventError, match=r"SSE record 1 \(data from line 4\): malformed JSON"
    ) as info:
        parse_events(text)
    assert (info.value.index, info.value.path) == (1, "$.x")


def test_malformed_json_in_an_array_names_the_element_and_the_path() -> None:
    text = '[\n {"type":"A"},\n {"type":"B","messages":[{"id":"x","content":"y"}, {"id": }]}\n]'
    with pytest.raises(InvalidEventError, match="line 3") as info:
        parse_events(text)
    assert (info.value.index, info.value.path) == (1, "$.messages[1].id")


def test_a_pretty_printed_document_with_an_error_is_read_as_one_event() -> None:
    text = '{\n  "type": "A",\n  "x": [1, 2,]\n}'
    with pytest.raises(InvalidEventError, match="line 3") as info:
        parse_events(text)
    assert (info.value.index, info.value.path) == (0, "$.x[2]")


def test_parse_events_does_not_validate_shapes() -> None:
    assert datas({"type": "TEXT_MESSAGE_START"}) == [{"type": "TEXT_MESSAGE_START"}]
    assert datas({"no": "type"}) == [{"no": "type"}]


def test_the_limits_are_module_constants() -> None:
    assert ingest.DEFAULT_MAX_EVENT_BYTES == 8 * 1024 * 1024
    assert ingest.DEFAULT_MAX_DEPTH == 64


_sse_payloads = st.lists(
    st.lists(st.binary(max_size=6).filter(lambda b: b"\r" not in b and b"\n" not in b), max_size=3)
    .map(b"\n".join),
    max_size=5,
)


@given(_sse_payloads, st.sampled_from([b"\n", b"\r", b"\r\n"]), st.lists(st.integers(0, 200)),
       st.sampled_from([b"", b": a comment\n"]), st.sampled_from([b"", b"\xef\xbb\xbf"]))
def test_the_sse_parser_reads_what_encode_sse_writes_however_the_bytes_are_cut(
    payloads: list[bytes], line_end: bytes, cuts: list[int], comment: bytes, bom: bytes
) -> None:
    # A byte order mark opening the stream is dropped, as the client's TextDecoder drops it.
    wire = comment + b"".join(  # the first event without an id: its data line opens it
        encode_sse(p, i or None) + b"event: ignored\nretry: 5\n\n" for i, p in enumerate(payloads)
    )
    wire = bom + wire.replace(b"\n", line_end)
    parser = SSEParser()
    got: list[bytes] = []
    at = 0
    for cut in sorted(cuts):
        got += parser.feed(wire[at:cut])
        at = max(at, cut)
    got += parser.feed(wire[at:])
    got += parser.finish()
    assert got == payloads
    lines = SSEParser()  # a reader that splits the lines strips the mark itself
    whole = [lines.line(line) for line in wire.removeprefix(bom).splitlines()]
    assert [p for p in whole if p is not None] == payloads
