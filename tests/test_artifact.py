"""The compacted-message-snapshot artifact: the strict validator, loading, and export from runs."""

from __future__ import annotations

import copy
import io
import json
import os
import re
import subprocess
import sys
from collections.abc import Callable
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from agui_store.cli import main as cli_main
from agui_store.cli.demo import record_demo
from agui_store.errors import AguiStoreError, ArgumentTypeError
from agui_store.exports import artifact as artifact_module
from agui_store.exports.artifact import (
    FRAMEWORK,
    MAX_CONTENT_LENGTH,
    MESSAGE_ROLES,
    OPTIONAL_FIELDS,
    REQUIRED_FIELDS,
    SCHEMA,
    SURFACE,
    UNKNOWN_ERROR_MESSAGE,
    ArtifactError,
    dumps_artifact,
    export_artifact,
    export_run,
    load_artifact,
    validate_artifact,
)
from agui_store.protocol.validate import render_path
from agui_store.store import Store
from tests.conftest import fixture_params
from tests.strategies import legal_streams

Artifact = dict[str, Any]
Mutation = Callable[[Artifact], None]

TIMESTAMP = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z")


def finished_artifact() -> Artifact:
    """A valid artifact with every field a RUN_FINISHED artifact may have."""
    return {
        "schema": SCHEMA,
        "framework": FRAMEWORK,
        "surface": SURFACE,
        "thread_id_ref": "thread-7",
        "run_id_ref": "run-7b",
        "started_at": "2026-05-01T09:30:00Z",
        "messages": [
            {"id": "u1", "role": "user", "content": "Where is my parcel?"},
            {"id": "t1", "role": "tool", "content": '{"status": "in transit"}'},
            {"id": "a1", "role": "assistant", "content": "It is on its way.", "name": "courier"},
        ],
        "terminal_event": "RUN_FINISHED",
        "finished_at": "2026-05-01T09:30:04.250Z",
        "parent_run_id_ref": "run-7a",
    }


def error_artifact() -> Artifact:
    """A valid artifact with every field a RUN_ERROR artifact may have."""
    artifact = finished_artifact()
    artifact["terminal_event"] = "RUN_ERROR"
    artifact["error_code"] = "upstream_timeout"
    artifact["error_message"] = "the carrier API did not answer in time"
    return artifact


def required_only() -> Artifact:
    return {k: v for k, v in finished_artifact().items() if k in REQUIRED_FIELDS}


def rejects(artifact: Any, path: str, reason: str, **labels: Any) -> ArtifactError:
    with pytest.raises(ArtifactError) as info:
        validate_artifact(artifact, **labels)
    assert info.value.path == path, str(info.value)
    assert reason in info.value.reason, str(info.value)
    return info.value


# --- the valid shapes --------------------------------------------------------------------


def test_an_artifact_with_only_the_required_fields_is_valid() -> None:
    validate_artifact(required_only())


def test_an_artifact_with_every_optional_field_of_a_finished_run_is_valid() -> None:
    validate_artifact(finished_artifact())


def test_an_artifact_with_every_optional_field_of_a_failed_run_is_valid() -> None:
    validate_artifact(error_artifact())


@pytest.mark.parametrize("field", ["finished_at", "parent_run_id_ref"])
def test_each_optional_field_of_a_finished_run_is_valid_on_its_own(field: str) -> None:
    artifact = required_only()
    artifact[field] = finished_artifact()[field]
    validate_artifact(artifact)


def test_a_failed_run_needs_only_its_error_message_beside_the_required_fields() -> None:
    artifact = required_only()
    artifact["terminal_event"] = "RUN_ERROR"
    artifact["error_message"] = "boom"
    validate_artifact(artifact)
    artifact["error_code"] = "E42"
    validate_artifact(artifact)


def test_the_contract_names_eight_required_and_four_optional_fields() -> None:
    assert set(REQUIRED_FIELDS) == {
        "schema", "framework", "surface", "thread_id_ref", "run_id_ref", "started_at",
        "messages", "terminal_event",
    }
    assert set(OPTIONAL_FIELDS) == {"finished_at", "parent_run_id_ref", "error_code",
                                    "error_message"}


@pytest.mark.parametrize("role", MESSAGE_ROLES)
def test_every_text_role_is_accepted(role: str) -> None:
    artifact = required_only()
    artifact["messages"] = [{"id": "m", "role": role, "content": "text"}]
    validate_artifact(artifact)


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("content", "x" * MAX_CONTENT_LENGTH),
        ("name", "n" * 60),
        ("id", "i" * 96),
        ("content", "  padded text is still text  "),
        ("content", "emoji 🎉 and accents é count as one character each"),
    ],
    ids=["content-at-its-limit", "name-at-its-limit", "id-at-its-limit", "padded-content",
         "non-ascii-content"],
)
def test_message_values_at_their_bounds_are_accepted(field: str, value: str) -> None:
    artifact = required_only()
    artifact["messages"][0][field] = value
    validate_artifact(artifact)


@pytest.mark.parametrize(
    ("started", "finished"),
    [
        ("2026-05-01T09:30:00Z", "2026-05-01T09:30:00Z"),
        ("2026-05-01T09:30:00.5Z", "2026-05-01T09:30:00.500000001Z"),
        ("2026-05-01T11:30:00+02:00", "2026-05-01T09:30:01Z"),
        ("2026-05-01T09:30:00-05:30", "2026-05-01T15:00:00.000Z"),
        ("2024-02-29T23:59:59Z", "2024-03-01T00:00:00Z"),
    ],
    ids=["same-instant", "fractions", "positive-offset", "negative-offset", "leap-day"],
)
def test_rfc3339_timestamps_with_any_zone_and_fraction_are_accepted(
    started: str, finished: str
) -> None:
    artifact = finished_artifact()
    artifact["started_at"], artifact["finished_at"] = started, finished
    validate_artifact(artifact)


def test_other_labels_are_accepted_only_when_the_caller_names_them() -> None:
    artifact = finished_artifact()
    artifact["framework"], artifact["surface"] = "agui-store", "run-export"
    rejects(artifact, "$.framework", "expected 'ag_ui'")
    validate_artifact(artifact, framework="agui-store", surface="run-export")
    validate_artifact(artifact, framework=None, surface=None)
    artifact["framework"] = " "
    rejects(artifact, "$.framework", "must not be empty", framework=None)


def test_an_artifact_error_is_a_value_error_of_the_library_with_path_and_reason() -> None:
    error = rejects({**finished_artifact(), "state": {}}, "$.state", "unexpected field")
    assert isinstance(error, AguiStoreError) and isinstance(error, ValueError)
    assert str(error).startswith("$.state: unexpected field 'state'")


# --- every way to be malformed -----------------------------------------------------------


def put(*keys: str | int, value: Any) -> Mutation:
    def mutate(artifact: Artifact) -> None:
        target: Any = artifact
        for key in keys[:-1]:
            target = target[key]
        target[keys[-1]] = value

    return mutate


def drop(*keys: str | int) -> Mutation:
    def mutate(artifact: Artifact) -> None:
        target: Any = artifact
        for key in keys[:-1]:
            target = target[key]
        del target[keys[-1]]

    return mutate


def case(name: str, mutate: Mutation, path: str, reason: str, *, error: bool = False) -> Any:
    return pytest.param(mutate, path, reason, error, id=name)


MALFORMED = [
    # extra fields and other event families, at every level
    case("extra-top-level-state", put("state", value={"a": 1}), "$.state", "unexpected field"),
    case("other-event-family-events", put("events", value=[{"type": "STATE_SNAPSHOT"}]),
         "$.events", "no other event families"),
    case("event-type-field", put("type", value="MESSAGES_SNAPSHOT"), "$.type",
         "unexpected field"),
    case("camel-case-field", put("threadId", value="thread-7"), "$.threadId",
         "unexpected field"),
    case("message-tool-calls", put("messages", 2, "toolCalls", value=[]),
         "$.messages[2].toolCalls", "only id, role, text content"),
    case("message-tool-call-id", put("messages", 1, "toolCallId", value="c1"),
         "$.messages[1].toolCallId", "unexpected field"),
    case("message-metadata", put("messages", 0, "metadata", value={}),
         "$.messages[0].metadata", "unexpected field"),
    case("message-encrypted-value", put("messages", 0, "encryptedValue", value="x"),
         "$.messages[0].encryptedValue", "unexpected field"),
    # every required field missing
    *[case(f"missing-{f}", drop(f), f"$.{f}", f"missing required field '{f}'")
      for f in REQUIRED_FIELDS],
    case("message-missing-id", drop("messages", 0, "id"), "$.messages[0].id",
         "missing required field 'id'"),
    case("message-missing-role", drop("messages", 0, "role"), "$.messages[0].role",
         "missing required field 'role'"),
    case("message-missing-content", drop("messages", 0, "content"), "$.messages[0].content",
         "missing required field 'content'"),
    # schema, framework, surface
    case("schema-v2", put("schema", value="ag-ui.compacted-message-snapshot.export.v2"),
         "$.schema", "expected 'ag-ui.compacted-message-snapshot.export.v1'"),
    case("schema-case", put("schema", value=SCHEMA.upper()), "$.schema", "expected"),
    case("schema-number", put("schema", value=1), "$.schema", "expected a string, got an integer"),
    case("framework-other", put("framework", value="langgraph"), "$.framework",
         "expected 'ag_ui'"),
    case("framework-null", put("framework", value=None), "$.framework", "got null"),
    case("surface-other", put("surface", value="event_stream"), "$.surface",
         "expected 'compacted_message_snapshot_artifact'"),
    # refs
    case("thread-ref-empty", put("thread_id_ref", value=""), "$.thread_id_ref",
         "must not be empty"),
    case("thread-ref-blank", put("thread_id_ref", value="  "), "$.thread_id_ref",
         "must not be empty"),
    case("thread-ref-number", put("thread_id_ref", value=7), "$.thread_id_ref",
         "expected a string, got an integer"),
    case("thread-ref-url", put("thread_id_ref", value="https://app.example/t/7"),
         "$.thread_id_ref", "not a URL"),
    case("thread-ref-too-long", put("thread_id_ref", value="t" * 97), "$.thread_id_ref",
         "at most 96 characters"),
    case("thread-ref-padded", put("thread_id_ref", value=" thread-7"), "$.thread_id_ref",
         "white space"),
    case("run-ref-null", put("run_id_ref", value=None), "$.run_id_ref", "got null"),
    case("run-ref-url", put("run_id_ref", value="s3://bucket/run"), "$.run_id_ref", "not a URL"),
    case("parent-ref-empty", put("parent_run_id_ref", value=""), "$.parent_run_id_ref",
         "must not be empty"),
    case("parent-ref-array", put("parent_run_id_ref", value=["run-7a"]), "$.parent_run_id_ref",
         "got an array"),
    case("parent-ref-url", put("parent_run_id_ref", value="http://x/run-7a"),
         "$.parent_run_id_ref", "not a URL"),
    # timestamps
    case("started-prose", put("started_at", value="yesterday"), "$.started_at", "RFC 3339"),
    case("started-naive", put("started_at", value="2026-05-01T09:30:00"), "$.started_at",
         "with a time zone"),
    case("started-date-only", put("started_at", value="2026-05-01"), "$.started_at",
         "RFC 3339"),
    case("started-space", put("started_at", value="2026-05-01 09:30:00Z"), "$.started_at",
         "RFC 3339"),
    case("started-lower-case", put("started_at", value="2026-05-01t09:30:00z"),
         "$.started_at", "RFC 3339"),
    case("started-epoch-number", put("started_at", value=1777627800), "$.started_at",
         "expected a string, got an integer"),
    case("started-month-13", put("started_at", value="2026-13-01T09:30:00Z"), "$.started_at",
         "not a real date"),
    case("started-feb-30", put("started_at", value="2026-02-30T09:30:00Z"), "$.started_at",
         "not a real date"),
    case("started-leap-second", put("started_at", value="2026-06-30T23:59:60Z"),
         "$.started_at", "not a real date"),
    case("started-offset-out-of-range", put("started_at", value="2026-05-01T09:30:00+24:00"),
         "$.started_at", "out of range"),
    case("started-unicode-digits",
         put("started_at", value="\uff12\uff10\uff12\uff16-05-01T09:30:00Z"),
         "$.started_at", "RFC 3339"),
    case("finished-before-started", put("finished_at", value="2026-05-01T09:29:59.999Z"),
         "$.finished_at", "not be earlier than started_at"),
    case("finished-before-started-across-zones",
         put("finished_at", value="2026-05-01T10:00:00+01:00"), "$.finished_at",
         "not be earlier than started_at"),
    case("finished-null", put("finished_at", value=None), "$.finished_at", "got null"),
    case("finished-prose", put("finished_at", value="later"), "$.finished_at", "RFC 3339"),
    # messages
    case("messages-object", put("messages", value={"u1": "hi"}), "$.messages",
         "expected an array of messages, got an object"),
    case("messages-empty", put("messages", value=[]), "$.messages", "at least one message"),
    case("message-string", put("messages", 0, value="hello"), "$.messages[0]",
         "a message must be an object, got a string"),
    case("message-id-empty", put("messages", 0, "id", value=""), "$.messages[0].id",
         "must not be empty"),
    case("message-id-number", put("messages", 0, "id", value=1), "$.messages[0].id",
         "expected a string"),
    case("message-id-too-long", put("messages", 0, "id", value="m" * 97), "$.messages[0].id",
         "at most 96"),
    case("message-id-padded", put("messages", 0, "id", value="u1 "), "$.messages[0].id",
         "white space"),
    case("message-id-duplicate", put("messages", 2, "id", value="u1"), "$.messages[2].id",
         "duplicate message id 'u1'"),
    case("role-reasoning", put("messages", 2, "role", value="reasoning"),
         "$.messages[2].role", "role must be one of"),
    case("role-activity", put("messages", 2, "role", value="activity"), "$.messages[2].role",
         "got 'activity'"),
    case("role-capitalised", put("messages", 0, "role", value="User"), "$.messages[0].role",
         "got 'User'"),
    case("role-empty", put("messages", 0, "role", value=""), "$.messages[0].role",
         "role must be one of"),
    case("role-null", put("messages", 0, "role", value=None), "$.messages[0].role", "got null"),
    case("content-parts", put("messages", 0, "content", value=[{"type": "text", "text": "hi"}]),
         "$.messages[0].content", "an array of content parts"),
    case("content-image-part",
         put("messages", 0, "content",
             value=[{"type": "image", "source": {"type": "url", "value": "https://x/i.png"}}]),
         "$.messages[0].content", "expected text content"),
    case("content-activity-object", put("messages", 0, "content", value={"progress": 1}),
         "$.messages[0].content", "expected a string, got an object"),
    case("content-null", put("messages", 2, "content", value=None), "$.messages[2].content",
         "got null"),
    case("content-empty", put("messages", 0, "content", value=""), "$.messages[0].content",
         "must not be empty"),
    case("content-blank", put("messages", 0, "content", value="\n\t "),
         "$.messages[0].content", "must not be empty"),
    case("content-too-long", put("messages", 0, "content", value="x" * 401),
         "$.messages[0].content", "at most 400 characters, got 401"),
    case("content-lone-surrogate", put("messages", 0, "content", value="bad \ud800 text"),
         "$.messages[0].content", "lone surrogate"),
    case("name-empty", put("messages", 2, "name", value=""), "$.messages[2].name",
         "must not be empty"),
    case("name-number", put("messages", 2, "name", value=3), "$.messages[2].name",
         "expected a string"),
    case("name-too-long", put("messages", 2, "name", value="n" * 61), "$.messages[2].name",
         "at most 60"),
    # terminal event and error details
    case("terminal-run-started", put("terminal_event", value="RUN_STARTED"),
         "$.terminal_event", "expected 'RUN_FINISHED' or 'RUN_ERROR'"),
    case("terminal-messages-snapshot", put("terminal_event", value="MESSAGES_SNAPSHOT"),
         "$.terminal_event", "got 'MESSAGES_SNAPSHOT'"),
    case("terminal-lower-case", put("terminal_event", value="run_finished"),
         "$.terminal_event", "got 'run_finished'"),
    case("terminal-event-object", put("terminal_event", value={"type": "RUN_FINISHED"}),
         "$.terminal_event", "expected a string, got an object"),
    case("error-code-without-run-error", put("error_code", value="E1"), "$.error_code",
         "only allowed when terminal_event is 'RUN_ERROR'"),
    case("error-message-without-run-error", put("error_message", value="boom"),
         "$.error_message", "only allowed when terminal_event is 'RUN_ERROR'"),
    case("run-error-without-message", drop("error_message"), "$.error_message",
         "required when terminal_event is 'RUN_ERROR'", error=True),
    case("error-message-empty", put("error_message", value=" "), "$.error_message",
         "must not be empty", error=True),
    case("error-message-too-long", put("error_message", value="e" * 201), "$.error_message",
         "at most 200", error=True),
    case("error-message-object", put("error_message", value={"message": "boom"}),
         "$.error_message", "got an object", error=True),
    case("error-code-empty", put("error_code", value=""), "$.error_code", "must not be empty",
         error=True),
    case("error-code-too-long", put("error_code", value="E" * 49), "$.error_code",
         "at most 48", error=True),
    case("error-code-number", put("error_code", value=500), "$.error_code",
         "expected a string, got an integer", error=True),
]


@pytest.mark.parametrize(("mutate", "path", "reason", "error"), MALFORMED)
def test_each_way_to_be_malformed_is_rejected_with_its_path_and_reason(
    mutate: Mutation, path: str, reason: str, error: bool
) -> None:
    artifact = error_artifact() if error else finished_artifact()
    validate_artifact(artifact)  # the base is valid: only the mutation breaks it
    mutate(artifact)
    rejects(artifact, path, reason)


@pytest.mark.parametrize("value", [[], "artifact", None, 1, True],
                         ids=["array", "string", "null", "number", "boolean"])
def test_anything_but_a_json_object_is_rejected_at_the_root(value: Any) -> None:
    rejects(value, "$", "an artifact must be a JSON object")


def test_a_mutation_table_covers_every_field_of_the_contract() -> None:
    paths = {p.values[1] for p in MALFORMED}
    for field in REQUIRED_FIELDS + OPTIONAL_FIELDS:
        assert f"$.{field}" in paths, field
    for field in ("id", "role", "content", "name"):
        assert any(p.endswith(f"].{field}") for p in paths), field


# --- loading: parse and validate, all or nothing ------------------------------------------


def test_an_artifact_loads_from_text_bytes_a_path_and_an_open_file(tmp_path: Path) -> None:
    artifact = error_artifact()
    text = dumps_artifact(artifact)
    path = tmp_path / "a.json"
    path.write_text(text, encoding="utf-8")
    assert load_artifact(text) == artifact
    assert load_artifact(text.encode("utf-8")) == artifact
    assert load_artifact(path) == artifact
    assert load_artifact(str(path)) == artifact
    assert load_artifact(io.StringIO(text)) == artifact
    with path.open("rb") as fh:
        assert load_artifact(fh) == artifact
    assert load_artifact(b"\xef\xbb\xbf" + text.encode("utf-8")) == artifact


@pytest.mark.parametrize(
    ("data", "reason"),
    [
        (b'{"schema": ', "not JSON"),
        (b"", "not JSON"),
        (b'{"schema": "x"} trailing', "not JSON"),
        (b'{"schema": "a", "schema": "b"}', "duplicate JSON key 'schema'"),
        (b'{"messages": [{"id": "a", "id": "b"}]}', "duplicate JSON key 'id'"),
        (b'{"x": NaN}', "NaN is not JSON"),
        (b'{"x": -Infinity}', "-Infinity is not JSON"),
        (b'{"schema": "\xff"}', "not UTF-8"),
    ],
    ids=["truncated", "empty", "trailing-data", "duplicate-key", "nested-duplicate-key", "nan",
         "infinity", "not-utf8"],
)
def test_bytes_that_are_not_strict_json_are_rejected_before_validation(
    data: bytes, reason: str
) -> None:
    with pytest.raises(ArtifactError) as info:
        load_artifact(data)
    assert info.value.path == "$" and reason in info.value.reason


def test_loading_a_malformed_artifact_returns_nothing_and_names_the_problem() -> None:
    artifact = finished_artifact()
    artifact["state"] = {"status": "should-not-be-here"}
    with pytest.raises(ArtifactError, match=r"\$\.state: unexpected field"):
        load_artifact(json.dumps(artifact))


@pytest.mark.parametrize("opening", ["[", '{"messages": ['])
def test_json_nested_deeper_than_python_reads_is_rejected_as_not_json(opening: str) -> None:
    with pytest.raises(ArtifactError) as info:
        load_artifact(opening * 100_000)
    assert info.value.path == "$" and "nested too deeply" in info.value.reason


def test_a_missing_file_is_an_os_error(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError):
        load_artifact(tmp_path / "absent.json")


# --- export from real runs ----------------------------------------------------------------


@pytest.fixture
def demo() -> Any:
    with Store(":memory:") as store:
        thread, runs = record_demo(store)
        yield store, thread, runs


def test_every_run_of_the_demo_conversation_exports_a_valid_artifact(demo: Any) -> None:
    store, thread, runs = demo
    for run_id in runs:
        artifact = export_run(store, run_id, thread_id=thread)
        validate_artifact(artifact)
        assert load_artifact(dumps_artifact(artifact)) == artifact


def test_what_is_no_checkout_is_refused_naming_what_it_is(demo: Any) -> None:
    store, thread, _ = demo
    for value in (None, "run-1", store.get_run("run-1", thread_id=thread)):
        with pytest.raises(ArgumentTypeError, match="export_artifact takes a Checkout") as info:
            export_artifact(value)
        assert isinstance(info.value, TypeError)


def test_the_demo_artifact_keeps_text_and_tool_results_and_drops_tool_calls(demo: Any) -> None:
    store, thread, _ = demo
    artifact = export_run(store, "run-2", thread_id=thread)
    run = store.get_run("run-2", thread_id=thread)
    assert artifact["schema"] == SCHEMA
    assert (artifact["framework"], artifact["surface"]) == (FRAMEWORK, SURFACE)
    assert (artifact["thread_id_ref"], artifact["run_id_ref"]) == (thread, "run-2")
    assert artifact["parent_run_id_ref"] == "run-1"
    assert artifact["terminal_event"] == "RUN_FINISHED"
    assert "error_code" not in artifact and "error_message" not in artifact
    assert [(m["id"], m["role"]) for m in artifact["messages"]] == [
        ("user-1", "user"), ("call-1-result", "tool"), ("assistant-2", "assistant"),
        ("user-2", "user"), ("call-2-result", "tool"), ("assistant-4", "assistant"),
    ]
    assert artifact["messages"][-1]["content"] == "Porto is cooler: 17°C and cloudy."
    assert TIMESTAMP.fullmatch(artifact["started_at"])
    assert TIMESTAMP.fullmatch(artifact["finished_at"])
    assert artifact["started_at"] == run.created_at.strftime("%Y-%m-%dT%H:%M:%S.") + \
        f"{run.created_at.microsecond // 1000:03d}Z"


def test_a_root_run_has_no_parent_ref(demo: Any) -> None:
    store, thread, _ = demo
    assert "parent_run_id_ref" not in export_run(store, "run-1", thread_id=thread)


def test_the_same_export_comes_from_a_checkout(demo: Any) -> None:
    store, thread, _ = demo
    checkout = store.checkout("fahrenheit", thread_id=thread)
    assert export_artifact(checkout) == export_run(store, "fahrenheit", thread_id=thread)


def test_other_labels_are_written_and_then_validated_with_the_same_labels(demo: Any) -> None:
    store, thread, _ = demo
    artifact = export_artifact(store.checkout("run-1", thread_id=thread),
                               framework="agui-store", surface="run-export")
    assert artifact["framework"] == "agui-store"
    validate_artifact(artifact, framework="agui-store", surface="run-export")
    with pytest.raises(ArtifactError, match="framework"):
        validate_artifact(artifact)


@pytest.mark.parametrize("events", fixture_params())
def test_every_recorded_run_exports_a_valid_artifact_or_says_it_has_no_text(
    events: list[dict[str, Any]],
) -> None:
    with Store(":memory:") as store:
        result = store.append(events)
        for run_id in result.run_ids:
            checkout = store.checkout(run_id, thread_id=result.thread_id)
            try:
                artifact = export_run(store, run_id, thread_id=result.thread_id)
            except ArtifactError as exc:
                # Only a run whose view holds no text at all (tool calls only) is refused.
                assert exc.path == "$.messages" and "no text message" in exc.reason
                assert not any(isinstance(m.get("content"), str) and m["content"].strip()
                               and m["role"] in MESSAGE_ROLES for m in checkout.messages)
                continue
            validate_artifact(artifact)
            assert load_artifact(dumps_artifact(artifact)) == artifact
            # The artifact's messages are the view's text messages, in the view's order.
            view = iter((m["id"], m["role"]) for m in checkout.messages)
            assert all(any(pair == v for v in view)
                       for pair in ((m["id"], m["role"]) for m in artifact["messages"]))


def test_an_incomplete_run_cannot_produce_an_artifact() -> None:
    with Store(":memory:") as store:
        store.append([{"type": "RUN_STARTED", "threadId": "t", "runId": "r"},
                      *say("m1", "half an ans")])
        with pytest.raises(ArtifactError, match="incomplete") as info:
            export_run(store, "r", thread_id="t")
        assert info.value.path == "$.terminal_event"
        assert "'r' of thread 't'" in info.value.reason


def say(message_id: str, text: str, role: str = "assistant") -> list[dict[str, Any]]:
    return [
        {"type": "TEXT_MESSAGE_START", "messageId": message_id, "role": role},
        {"type": "TEXT_MESSAGE_CONTENT", "messageId": message_id, "delta": text},
        {"type": "TEXT_MESSAGE_END", "messageId": message_id},
    ]


def one_run(store: Store, *body: dict[str, Any], end: list[dict[str, Any]] | None = None,
            run_input: dict[str, Any] | None = None, thread: str = "t",
            run_id: str = "r") -> Artifact:
    started = {"type": "RUN_STARTED", "threadId": thread, "runId": run_id}
    closing = end if end is not None else [{"type": "RUN_FINISHED", "threadId": thread,
                                            "runId": run_id}]
    store.append([started, *body, *closing], input=run_input)
    return export_run(store, run_id, thread_id=thread)


def test_a_failed_run_carries_its_error_message_and_code() -> None:
    with Store(":memory:") as store:
        artifact = one_run(store, *say("a1", "Looking"),
                           end=[{"type": "RUN_ERROR", "message": "model overloaded",
                                 "code": "overloaded"}])
    assert artifact["terminal_event"] == "RUN_ERROR"
    assert (artifact["error_message"], artifact["error_code"]) == ("model overloaded",
                                                                   "overloaded")


def test_a_late_run_error_after_run_finished_makes_a_run_error_artifact() -> None:
    with Store(":memory:") as store:
        artifact = one_run(store, *say("a1", "Done"), end=[
            {"type": "RUN_FINISHED", "threadId": "t", "runId": "r"},
            {"type": "RUN_ERROR", "message": "late failure"},
        ])
    assert artifact["terminal_event"] == "RUN_ERROR"
    assert artifact["error_message"] == "late failure" and "error_code" not in artifact


def test_long_and_empty_error_details_are_cut_or_replaced() -> None:
    with Store(":memory:") as store:
        artifact = one_run(store, *say("a1", "x"), end=[
            {"type": "RUN_ERROR", "message": "m" * 500, "code": "c" * 60}])
        assert len(artifact["error_message"]) == 200 and artifact["error_message"][-1] == "…"
        assert len(artifact["error_code"]) == 48
        artifact = one_run(store, *say("a2", "x"), run_id="r2", end=[
            {"type": "RUN_ERROR", "message": " ", "code": ""}])
        assert artifact["error_message"] == UNKNOWN_ERROR_MESSAGE
        assert "error_code" not in artifact


def test_an_error_checkout_without_its_event_gets_the_unknown_error_message() -> None:
    with Store(":memory:") as store:
        one_run(store, *say("a1", "x"), end=[{"type": "RUN_ERROR", "message": "boom"}])
        artifact = export_artifact(store.checkout("r", thread_id="t"))
    assert artifact["error_message"] == UNKNOWN_ERROR_MESSAGE


@pytest.mark.parametrize("outcome", ["interrupt", "cancelled", "success"])
def test_interrupted_and_cancelled_runs_end_with_run_finished(outcome: str) -> None:
    finished: dict[str, Any] = {"type": "RUN_FINISHED", "threadId": "t", "runId": "r",
                                "outcome": {"type": outcome}}
    if outcome == "interrupt":
        finished["outcome"]["interrupts"] = [{"id": "i1", "reason": "approval"}]
    with Store(":memory:") as store:
        artifact = one_run(store, *say("a1", "Shall I?"), end=[finished])
    assert artifact["terminal_event"] == "RUN_FINISHED"


def test_content_is_reduced_to_text_and_non_text_messages_are_dropped() -> None:
    run_input = {
        "threadId": "t", "runId": "r",
        "messages": [
            {"id": "sys", "role": "system", "content": "Be brief.", "name": "policy"},
            {"id": "u1", "role": "user", "content": [
                {"type": "text", "text": "What is in"},
                {"type": "image", "source": {"type": "url", "value": "https://x/cat.png"}},
                {"type": "text", "text": "this picture?"},
            ]},
            {"id": "u2", "role": "user", "content": [
                {"type": "image", "source": {"type": "data", "value": "AAAA",
                                             "mimeType": "image/png"}}]},
            {"id": "r1", "role": "reasoning", "content": "thinking about cats"},
            {"id": "act", "role": "activity", "activityType": "progress", "content": {"p": 1}},
            {"id": "a0", "role": "assistant", "toolCalls": [
                {"id": "c1", "type": "function", "function": {"name": "look", "arguments": "{}"}}]},
            {"id": "t0", "role": "tool", "toolCallId": "c1", "content": ""},
            {"id": "dev", "role": "developer", "content": "debug on", "name": " "},
            {"id": "u1", "role": "user", "content": "a later message with a reused id"},
        ],
    }
    with Store(":memory:") as store:
        artifact = one_run(store, *say("a1", "A cat. " + "Meow " * 100), run_input=run_input)
    messages = artifact["messages"]
    assert [m["id"] for m in messages] == ["sys", "u1", "dev", "a1"]
    assert messages[0] == {"id": "sys", "role": "system", "content": "Be brief.",
                           "name": "policy"}
    assert messages[1]["content"] == "What is in\nthis picture?"
    assert "name" not in messages[2]  # a blank name is optional, so it is left out
    assert len(messages[3]["content"]) == MAX_CONTENT_LENGTH
    assert messages[3]["content"].endswith("…")


def test_a_run_with_only_tool_calls_cannot_produce_an_artifact() -> None:
    with Store(":memory:") as store, pytest.raises(ArtifactError, match="no text") as info:
        one_run(store,
                {"type": "TOOL_CALL_START", "toolCallId": "c1", "toolCallName": "f"},
                {"type": "TOOL_CALL_END", "toolCallId": "c1"})
    assert info.value.path == "$.messages"


@pytest.mark.parametrize(
    ("thread", "run_id", "path"),
    [("t" * 97, "r", "$.thread_id_ref"), ("t", "https://runs.example/1", "$.run_id_ref")],
    ids=["thread-id-too-long", "run-id-is-a-url"],
)
def test_ids_the_contract_cannot_carry_make_the_export_fail(
    thread: str, run_id: str, path: str
) -> None:
    with Store(":memory:") as store, pytest.raises(ArtifactError) as info:
        one_run(store, *say("a1", "hi"), thread=thread, run_id=run_id)
    assert info.value.path == path and "cannot be exported" in info.value.reason


def test_a_message_id_the_contract_cannot_carry_makes_the_export_fail() -> None:
    with Store(":memory:") as store, pytest.raises(ArtifactError) as info:
        one_run(store, *say("m" * 97, "hi"))
    assert info.value.path == "$.messages[0].id"


# --- properties ----------------------------------------------------------------------------

REFUSALS = ("incomplete", "no text message")


# Each example builds a store and restores every run: capped so the CI profile stays quick.
@settings(max_examples=min(100, settings.default.max_examples))
@given(stream=legal_streams(max_runs=3))
def test_every_artifact_exported_from_a_generated_conversation_validates(
    stream: list[dict[str, Any]],
) -> None:
    with Store(":memory:") as store:
        store.append(stream)
        for run in store.runs("t"):
            try:
                artifact = export_run(store, run.run_id, thread_id="t")
            except ArtifactError as exc:
                assert any(r in exc.reason for r in REFUSALS), exc
                assert (run.status == "incomplete") == ("incomplete" in exc.reason)
                continue
            validate_artifact(artifact)
            assert load_artifact(dumps_artifact(artifact)) == artifact
            assert artifact["terminal_event"] == (
                "RUN_ERROR" if run.status == "error" else "RUN_FINISHED")


ID_CHARS = st.characters(codec="utf-8", exclude_categories=["Cs", "Zs", "Zl", "Zp", "Cc"])
IDS = st.text(ID_CHARS, min_size=1, max_size=20).filter(lambda s: "://" not in s)
TEXT = st.text(st.characters(codec="utf-8", exclude_categories=["Cs"]), min_size=1,
               max_size=60).filter(str.strip)
MOMENTS = st.datetimes(min_value=datetime(1970, 1, 1), max_value=datetime(2100, 1, 1),
                       timezones=st.just(timezone.utc))


def stamp(moment: datetime, zone: timedelta) -> str:
    local = moment.astimezone(timezone(zone))
    text = local.isoformat(timespec="microseconds")
    return text.replace("+00:00", "Z") if zone == timedelta(0) else text


@st.composite
def valid_artifacts(draw: st.DrawFn) -> Artifact:
    ids = draw(st.lists(IDS, min_size=1, max_size=5, unique=True))
    messages = []
    for mid in ids:
        message = {"id": mid, "role": draw(st.sampled_from(MESSAGE_ROLES)),
                   "content": draw(TEXT)}
        if draw(st.booleans()):
            message["name"] = draw(TEXT)
        messages.append(message)
    zone = timedelta(minutes=draw(st.integers(-12 * 60, 14 * 60)))
    started = draw(MOMENTS)
    artifact: Artifact = {
        "schema": SCHEMA, "framework": FRAMEWORK, "surface": SURFACE,
        "thread_id_ref": draw(IDS), "run_id_ref": draw(IDS),
        "started_at": stamp(started, zone), "messages": messages,
        "terminal_event": draw(st.sampled_from(["RUN_FINISHED", "RUN_ERROR"])),
    }
    if draw(st.booleans()):
        later = started + timedelta(milliseconds=draw(st.integers(0, 10**9)))
        artifact["finished_at"] = stamp(later, timedelta(0))
    if draw(st.booleans()):
        artifact["parent_run_id_ref"] = draw(IDS)
    if artifact["terminal_event"] == "RUN_ERROR":
        artifact["error_message"] = draw(TEXT)
        if draw(st.booleans()):
            artifact["error_code"] = draw(TEXT)
    return artifact


@given(artifact=valid_artifacts())
def test_generated_valid_artifacts_validate_and_survive_a_json_round_trip(
    artifact: Artifact,
) -> None:
    validate_artifact(artifact)
    assert load_artifact(dumps_artifact(artifact)) == artifact


NOT_STRINGS = st.one_of(st.none(), st.booleans(), st.integers(), st.floats(allow_nan=False),
                        st.lists(st.integers(), max_size=2),
                        st.dictionaries(st.text(max_size=3), st.integers(), max_size=2))
BAD_REFS = st.one_of(NOT_STRINGS, st.sampled_from(["", " ", "a" * 97, "x://y", " a"]))
BAD_TIMESTAMPS = st.one_of(
    NOT_STRINGS,
    st.text(max_size=30).filter(
        lambda s: not re.fullmatch(r"[0-9-]+T[0-9:.]+(Z|[+-][0-9:]+)", s)),
    st.sampled_from(["2026-02-30T00:00:00Z", "2026-01-01T24:00:00Z", "2026-01-01T00:00:00"]),
)
BAD_TEXT = st.one_of(NOT_STRINGS, st.sampled_from(["", "  ", "\n"]))


@st.composite
def broken(draw: st.DrawFn) -> tuple[Artifact, str]:
    """A valid artifact with one field changed so that it breaks the contract, and the path
    the validator must name."""
    artifact = draw(valid_artifacts())
    n = len(artifact["messages"])
    i = draw(st.integers(0, n - 1))
    message = artifact["messages"][i]
    kind = draw(st.sampled_from([
        "extra", "missing", "schema", "framework", "surface", "ref", "started", "finished",
        "messages", "message-extra", "message-missing", "id", "duplicate", "role", "content",
        "name", "terminal", "error-field", "no-error-message",
    ]))
    if kind == "extra":
        key = draw(st.text(min_size=1, max_size=12).filter(
            lambda k: k not in REQUIRED_FIELDS + OPTIONAL_FIELDS))
        artifact[key] = draw(st.none() | st.integers() | st.text(max_size=3))
        return artifact, render_path([key])
    if kind == "missing":
        key = draw(st.sampled_from(REQUIRED_FIELDS))
        del artifact[key]
        return artifact, f"$.{key}"
    if kind == "schema":
        artifact["schema"] = draw(st.one_of(NOT_STRINGS, st.text().filter(lambda s: s != SCHEMA)))
        return artifact, "$.schema"
    if kind in ("framework", "surface"):
        good = FRAMEWORK if kind == "framework" else SURFACE
        artifact[kind] = draw(st.one_of(NOT_STRINGS, st.text().filter(lambda s: s != good)))
        return artifact, f"$.{kind}"
    if kind == "ref":
        key = draw(st.sampled_from(["thread_id_ref", "run_id_ref", "parent_run_id_ref"]))
        artifact[key] = draw(BAD_REFS)
        return artifact, f"$.{key}"
    if kind == "started":
        artifact["started_at"] = draw(BAD_TIMESTAMPS)
        return artifact, "$.started_at"
    if kind == "finished":
        earlier = stamp(parse(artifact["started_at"]) - timedelta(microseconds=1), timedelta(0))
        artifact["finished_at"] = draw(st.one_of(BAD_TIMESTAMPS, st.just(earlier)))
        return artifact, "$.finished_at"
    if kind == "messages":
        artifact["messages"] = draw(st.one_of(st.just([]), NOT_STRINGS.filter(
            lambda v: not isinstance(v, list)), st.text()))
        return artifact, "$.messages"
    if kind == "message-extra":
        key = draw(st.sampled_from(["toolCalls", "toolCallId", "metadata", "type", "parts"]))
        message[key] = draw(st.none() | st.text(max_size=3))
        return artifact, f"$.messages[{i}].{key}"
    if kind == "message-missing":
        key = draw(st.sampled_from(["id", "role", "content"]))
        del message[key]
        return artifact, f"$.messages[{i}].{key}"
    if kind == "id":
        message["id"] = draw(st.one_of(BAD_TEXT, st.just("m" * 97)))
        return artifact, f"$.messages[{i}].id"
    if kind == "duplicate":
        artifact["messages"].append(dict(message))
        return artifact, f"$.messages[{n}].id"
    if kind == "role":
        message["role"] = draw(st.one_of(NOT_STRINGS, st.text().filter(
            lambda r: r not in MESSAGE_ROLES)))
        return artifact, f"$.messages[{i}].role"
    if kind == "content":
        message["content"] = draw(st.one_of(
            BAD_TEXT, st.just("x" * 401),
            st.just([{"type": "text", "text": message["content"]}])))
        return artifact, f"$.messages[{i}].content"
    if kind == "name":
        message["name"] = draw(st.one_of(BAD_TEXT, st.just("n" * 61)))
        return artifact, f"$.messages[{i}].name"
    if kind == "terminal":
        artifact["terminal_event"] = draw(st.one_of(NOT_STRINGS, st.text().filter(
            lambda t: t not in ("RUN_FINISHED", "RUN_ERROR"))))
        return artifact, "$.terminal_event"
    if kind == "error-field":
        if artifact["terminal_event"] == "RUN_ERROR":
            key = draw(st.sampled_from(["error_message", "error_code"]))
            artifact[key] = draw(BAD_TEXT)
        else:
            key = draw(st.sampled_from(["error_message", "error_code"]))
            artifact[key] = draw(TEXT)
        return artifact, f"$.{key}"
    artifact["terminal_event"] = "RUN_ERROR"
    artifact.pop("error_message", None)
    return artifact, "$.error_message"


def parse(text: str) -> datetime:
    return datetime.fromisoformat(text.replace("Z", "+00:00"))


@given(case=broken())
def test_any_single_field_mutation_that_breaks_the_contract_is_rejected_at_that_field(
    case: tuple[Artifact, str],
) -> None:
    artifact, path = case
    with pytest.raises(ArtifactError) as info:
        validate_artifact(copy.deepcopy(artifact))
    assert info.value.path == path, str(info.value)


# --- the command line ----------------------------------------------------------------------


def cli(*args: str, db: Path, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k != "AGUI_STORE_DB"}
    return subprocess.run([sys.executable, "-m", "agui_store", "--db", str(db), *args],
                          capture_output=True, text=True, env=env, input=stdin, timeout=120)


@pytest.fixture
def demo_db(tmp_path: Path) -> tuple[Path, str]:
    db = tmp_path / "store.db"
    with Store(db) as store:
        thread, _ = record_demo(store)
        store.append([{"type": "RUN_STARTED", "threadId": thread, "runId": "run-open"}])
    return db, thread


def test_export_artifact_writes_a_file_that_validate_artifact_accepts(
    demo_db: tuple[Path, str], tmp_path: Path
) -> None:
    db, thread = demo_db
    out = tmp_path / "run-2.json"
    done = cli("export-artifact", "run-2", "--thread", thread, "-o", str(out), db=db)
    assert done.returncode == 0, done.stderr
    assert load_artifact(out)["run_id_ref"] == "run-2"
    checked = cli("validate-artifact", str(out), db=db)
    assert (checked.returncode, checked.stdout) == (0, "valid\n")
    checked = cli("--json", "validate-artifact", str(out), db=db)
    assert json.loads(checked.stdout) == {"valid": True}


def test_export_artifact_json_names_the_run_it_wrote_though_head_moved_meanwhile(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    db = tmp_path / "store.db"
    with Store(db) as store:
        thread, _ = record_demo(store)
    exporting = artifact_module.export_run

    def export_as_another_writer_records(store: Store, ref: str, **options: Any) -> Artifact:
        exported = exporting(store, ref, **options)
        with Store(db) as other:  # the next run lands between the export and its report
            one_run(other, *say("m-4", "later"), thread=thread, run_id="run-4")
        return exported

    monkeypatch.setattr(artifact_module, "export_run", export_as_another_writer_records)
    out, stdout = tmp_path / "head.json", io.StringIO()
    argv = ["--db", str(db), "--json", "export-artifact", "--thread", thread, "-o", str(out)]
    assert cli_main(argv, out=stdout) == 0
    written = load_artifact(out)
    assert json.loads(stdout.getvalue()) == {
        "output": str(out), "threadId": thread, "runId": written["run_id_ref"],
        "bytes": out.stat().st_size,
    }
    assert written["run_id_ref"] != "run-4"


def test_export_artifact_prints_to_stdout_by_default(demo_db: tuple[Path, str]) -> None:
    db, thread = demo_db
    done = cli("export-artifact", "run-3", "--thread", thread, db=db)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["run_id_ref"] == "run-3"


def test_validate_artifact_exits_1_with_the_path_and_reason(
    demo_db: tuple[Path, str], tmp_path: Path
) -> None:
    db, _ = demo_db
    bad = finished_artifact()
    bad["messages"][0]["content"] = [{"type": "text", "text": "hi"}]
    path = tmp_path / "bad.json"
    path.write_text(json.dumps(bad), encoding="utf-8")
    done = cli("validate-artifact", str(path), db=db)
    assert done.returncode == 1
    assert done.stdout == ("invalid: $.messages[0].content: expected text content (a string), "
                           "got an array of content parts\n")
    done = cli("--json", "validate-artifact", "-", db=db, stdin=json.dumps(bad))
    assert done.returncode == 1
    assert json.loads(done.stdout)["path"] == "$.messages[0].content"


def test_validate_artifact_rejects_a_file_that_is_not_json(
    demo_db: tuple[Path, str], tmp_path: Path
) -> None:
    db, _ = demo_db
    path = tmp_path / "x.json"
    path.write_text("{not json", encoding="utf-8")
    done = cli("validate-artifact", str(path), db=db)
    assert done.returncode == 1 and done.stdout.startswith("invalid: $: not JSON")


def test_validate_artifact_says_json_nested_too_deeply_is_invalid_exit_1(
    demo_db: tuple[Path, str],
) -> None:
    db, _ = demo_db
    done = cli("validate-artifact", "-", db=db, stdin="[" * 100_000)
    assert (done.returncode, done.stderr) == (1, "")
    assert done.stdout.startswith("invalid: $: not JSON: nested too deeply")


def test_export_artifact_of_an_incomplete_run_fails_with_the_reason(
    demo_db: tuple[Path, str],
) -> None:
    db, thread = demo_db
    done = cli("export-artifact", "run-open", "--thread", thread, db=db)
    assert done.returncode == 1 and done.stdout == ""
    assert "agui-store export-artifact: $.terminal_event: run 'run-open'" in done.stderr
    assert "incomplete" in done.stderr


def test_the_artifact_commands_have_help_with_an_example(tmp_path: Path) -> None:
    for command in ("export-artifact", "validate-artifact"):
        text = cli(command, "-h", db=tmp_path / "s.db").stdout
        assert "example: agui-store " + command in text


def test_load_artifact_given_a_decoded_dict_says_validate_artifact_checks_those() -> None:
    with pytest.raises(ArtifactError, match=r"not dict \(validate_artifact checks a decoded dict"):
        load_artifact({"format": "x"})  # type: ignore[arg-type]
