"""The slim export: most recent N messages, content cut at a length, tool arguments redacted,
tool results omitted; presets minimal, standard and full."""

from __future__ import annotations

import copy
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from agui_store.cli.demo import record_demo
from agui_store.errors import AguiStoreError, ArgumentTypeError
from agui_store.exports.slim import (
    PRESETS,
    TRUNCATION_MARKER,
    SlimError,
    SlimOptions,
    slim,
    slim_messages,
    truncate_text,
)
from agui_store.protocol import validate
from agui_store.records import Checkout
from agui_store.store import Store
from tests.conftest import fixture_params
from tests.strategies import message_lists

Message = dict[str, Any]


def assert_valid_messages(messages: list[Message]) -> None:
    """Slimmed messages are still AG-UI 1.0 messages: a client accepts them as a snapshot."""
    validate.validate_event({"type": "MESSAGES_SNAPSHOT", "messages": messages})


def text_of(message: Message) -> str:
    content = message.get("content")
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(p["text"] for p in content if p.get("type") == "text")
    return ""


@pytest.fixture(scope="module")
def demo() -> Any:
    with Store(":memory:") as store:
        thread, _ = record_demo(store)
        yield store.checkout("run-2", thread_id=thread)


# --- presets -------------------------------------------------------------------------------


def test_the_presets_have_the_documented_numbers() -> None:
    assert PRESETS["minimal"] == SlimOptions(last=10, max_content=200, redact_tool_args=True,
                                             drop_tool_results=True)
    assert PRESETS["standard"] == SlimOptions(last=50, max_content=1000)
    assert PRESETS["full"] == SlimOptions()
    assert list(PRESETS) == ["minimal", "standard", "full"]


def test_the_full_preset_returns_the_messages_unchanged_as_a_copy(demo: Checkout) -> None:
    before = copy.deepcopy(demo.messages)
    out = slim(demo, "full")
    assert out == demo.messages
    out[0]["content"] = "changed"
    out[1]["toolCalls"][0]["function"]["name"] = "changed"
    assert demo.messages == before


def test_the_minimal_preset_drops_tool_results_and_redacts_the_calls(demo: Checkout) -> None:
    out = slim(demo, "minimal")
    assert [m["id"] for m in out] == ["user-1", "assistant-1", "assistant-2", "user-2",
                                      "assistant-3", "assistant-4"]
    assert out[1]["toolCalls"] == [{"id": "call-1", "type": "function",
                                    "function": {"name": "get_weather", "arguments": ""}}]
    assert_valid_messages(out)


def test_the_standard_preset_keeps_a_short_conversation_whole(demo: Checkout) -> None:
    assert slim(demo) == demo.messages == slim(demo, "standard")


def test_a_preset_value_can_be_overridden(demo: Checkout) -> None:
    out = slim(demo, "minimal", last=2, redact_tool_args=False)
    assert [m["id"] for m in out] == ["assistant-3", "assistant-4"]
    assert out[0]["toolCalls"][0]["function"]["arguments"] == '{"city": "Porto"}'


def test_a_message_list_can_be_slimmed_like_a_checkout(demo: Checkout) -> None:
    assert slim(demo.messages, "minimal") == slim(demo, "minimal")


def test_an_unknown_preset_is_a_slim_error_naming_the_presets(demo: Checkout) -> None:
    with pytest.raises(SlimError, match="minimal, standard, full") as info:
        slim(demo, "tiny")
    assert isinstance(info.value, AguiStoreError) and isinstance(info.value, ValueError)


def test_an_iterator_of_messages_slims_as_their_list(demo: Checkout) -> None:
    assert slim(iter(demo.messages), "minimal") == slim(list(demo.messages), "minimal")
    assert slim(m for m in demo.messages) == slim(demo)


def test_an_unknown_override_is_a_type_error(demo: Checkout) -> None:
    with pytest.raises(TypeError):
        slim(demo, "minimal", lats=3)


@pytest.mark.parametrize("value", [None, "hello", 5, {"role": "user"}, [{"role": "user"}, 7]],
                         ids=["none", "str", "int", "dict", "list-holding-an-int"])
def test_what_is_neither_a_checkout_nor_messages_is_refused_naming_what_it_is(value: Any) -> None:
    with pytest.raises(ArgumentTypeError, match="slim takes a Checkout or a list of") as info:
        slim(value)
    assert isinstance(info.value, TypeError)


# --- last N --------------------------------------------------------------------------------


@pytest.mark.parametrize(("last", "expected"), [(0, 0), (1, 1), (3, 3), (8, 8), (12, 8), (100, 8)])
def test_last_keeps_exactly_the_most_recent_n_messages(
    demo: Checkout, last: int, expected: int
) -> None:
    out = slim_messages(demo.messages, last=last)
    assert len(out) == expected
    assert out == demo.messages[len(demo.messages) - expected:]


def test_last_counts_the_messages_left_after_tool_results_are_dropped(demo: Checkout) -> None:
    out = slim_messages(demo.messages, last=3, drop_tool_results=True)
    assert [m["id"] for m in out] == ["user-2", "assistant-3", "assistant-4"]


def test_a_cut_window_may_start_with_a_tool_result_whose_call_it_left_out(
    demo: Checkout,
) -> None:
    out = slim_messages(demo.messages, last=2)
    assert [m["role"] for m in out] == ["tool", "assistant"]
    assert_valid_messages(out)


@pytest.mark.parametrize(("name", "value"),
                         [("last", -1), ("max_content", 0), ("last", 1.5), ("last", True)])
def test_out_of_range_values_are_slim_errors(demo: Checkout, name: str, value: Any) -> None:
    with pytest.raises(SlimError, match=name):
        slim_messages(demo.messages, **{name: value})


# --- truncation ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "limit", "expected"),
    [
        ("hello", 5, "hello"),
        ("hello", 10, "hello"),
        ("hello!", 5, "hell…"),
        ("hello", 1, "…"),
        ("", 1, ""),
        ("🎉🎉🎉", 2, "🎉…"),
    ],
    ids=["at-limit", "under-limit", "over-limit", "marker-only", "empty", "characters-not-bytes"],
)
def test_text_is_cut_to_exactly_the_limit_with_the_marker(
    text: str, limit: int, expected: str
) -> None:
    assert truncate_text(text, limit) == expected
    assert len(truncate_text(text, limit)) <= limit


def test_content_longer_than_max_content_ends_with_the_marker(demo: Checkout) -> None:
    out = slim_messages(demo.messages, max_content=12)
    assert out[0]["content"] == "What's the " + TRUNCATION_MARKER
    assert out[4]["content"] == "And in Porto?"[:11] + TRUNCATION_MARKER
    for before, after in zip(demo.messages, out, strict=True):
        if isinstance(before.get("content"), str) and len(before["content"]) <= 12:
            assert after["content"] == before["content"]
        assert len(text_of(after)) <= 12
    # Tool results are content too; tool call arguments are not.
    assert out[2]["content"] == '{"temp": 21,' [:11] + TRUNCATION_MARKER
    assert out[1]["toolCalls"] == demo.messages[1]["toolCalls"]


def parts_message() -> Message:
    return {
        "id": "u1", "role": "user",
        "content": [
            {"type": "text", "text": "abcdef"},
            {"type": "image", "source": {"type": "url", "value": "https://x/1.png"}},
            {"type": "text", "text": "ghijkl"},
            {"type": "document", "source": {"type": "url", "value": "https://x/d.pdf"}},
        ],
    }


def test_content_parts_are_cut_as_one_text_and_everything_after_the_cut_goes() -> None:
    (out,) = slim_messages([parts_message()], max_content=9)
    assert out["content"] == [
        {"type": "text", "text": "abcdef"},
        {"type": "image", "source": {"type": "url", "value": "https://x/1.png"}},
        {"type": "text", "text": "gh" + TRUNCATION_MARKER},
    ]
    assert len(text_of(out)) == 9
    assert_valid_messages([out])


def test_content_parts_that_fit_are_left_whole_media_included() -> None:
    message = parts_message()
    assert slim_messages([message], max_content=12) == [message]


def test_a_cut_exactly_at_a_part_boundary_still_shows_the_marker() -> None:
    (out,) = slim_messages([parts_message()], max_content=7)
    assert out["content"] == [
        {"type": "text", "text": "abcdef"},
        {"type": "image", "source": {"type": "url", "value": "https://x/1.png"}},
        {"type": "text", "text": TRUNCATION_MARKER},
    ]


def test_activity_content_is_an_object_and_is_left_alone() -> None:
    activity = {"id": "a", "role": "activity", "activityType": "progress",
                "content": {"log": "x" * 500}}
    assert slim_messages([activity], max_content=10) == [activity]


# --- redaction and omission ----------------------------------------------------------------


def test_redacted_tool_calls_keep_only_id_and_name() -> None:
    message = {"id": "a", "role": "assistant", "content": "Checking.", "toolCalls": [
        {"id": "c1", "type": "function", "metadata": {"user": "alice"}, "encryptedValue": "e",
         "function": {"name": "lookup", "arguments": '{"ssn": "123-45-6789"}'}},
        {"id": "c2", "type": "function", "function": {"name": "mail", "arguments": "{}"}},
    ]}
    (out,) = slim_messages([message], redact_tool_args=True)
    assert out["toolCalls"] == [
        {"id": "c1", "type": "function", "function": {"name": "lookup", "arguments": ""}},
        {"id": "c2", "type": "function", "function": {"name": "mail", "arguments": ""}},
    ]
    assert "123-45-6789" not in json.dumps(out)
    assert out["content"] == "Checking."
    assert_valid_messages([out])


def test_dropping_tool_results_keeps_the_calls_that_produced_them(demo: Checkout) -> None:
    out = slim_messages(demo.messages, drop_tool_results=True)
    assert all(m["role"] != "tool" for m in out)
    calls = [c["id"] for m in out for c in m.get("toolCalls", [])]
    assert calls == ["call-1", "call-2"]


def test_the_input_messages_are_never_modified(demo: Checkout) -> None:
    before = copy.deepcopy(demo.messages)
    slim_messages(demo.messages, last=3, max_content=2, redact_tool_args=True,
                  drop_tool_results=True)
    assert demo.messages == before


# --- real conversations and generated ones -------------------------------------------------


@pytest.mark.parametrize("events", fixture_params())
@pytest.mark.parametrize("preset", list(PRESETS))
def test_every_preset_slims_every_recorded_run_to_valid_messages(
    events: list[dict[str, Any]], preset: str
) -> None:
    options = PRESETS[preset]
    with Store(":memory:") as store:
        result = store.append(events)
        for run_id in result.run_ids:
            checkout = store.checkout(run_id, thread_id=result.thread_id)
            out = slim(checkout, preset)
            check_slimmed(checkout.messages, out, options)


def check_slimmed(before: list[Message], out: list[Message], options: SlimOptions) -> None:
    assert_valid_messages(out)
    kept = [m for m in before if not (options.drop_tool_results and m["role"] == "tool")]
    if options.last is not None:
        kept = kept[max(0, len(kept) - options.last):]
    assert [m["id"] for m in out] == [m["id"] for m in kept]  # the most recent ones, in order
    for original, slimmed in zip(kept, out, strict=True):
        if options.max_content is not None:
            assert len(text_of(slimmed)) <= options.max_content
            if len(text_of(original)) > options.max_content:
                assert text_of(slimmed).endswith(TRUNCATION_MARKER)
            else:
                assert slimmed.get("content") == original.get("content")
        else:
            assert slimmed.get("content") == original.get("content")
        calls = original.get("toolCalls")
        if calls is not None:
            assert [c["id"] for c in slimmed["toolCalls"]] == [c["id"] for c in calls]
            assert [c["function"]["name"] for c in slimmed["toolCalls"]] == [
                c["function"]["name"] for c in calls]
            if options.redact_tool_args:
                assert all(c["function"]["arguments"] == "" for c in slimmed["toolCalls"])
    if options == PRESETS["full"]:
        assert out == before


@given(messages=message_lists,
       options=st.builds(SlimOptions,
                         last=st.none() | st.integers(0, 6),
                         max_content=st.none() | st.integers(1, 10),
                         redact_tool_args=st.booleans(),
                         drop_tool_results=st.booleans()))
def test_any_options_on_generated_messages_give_the_documented_result(
    messages: list[Message], options: SlimOptions
) -> None:
    before = copy.deepcopy(messages)
    out = slim_messages(messages, last=options.last, max_content=options.max_content,
                        redact_tool_args=options.redact_tool_args,
                        drop_tool_results=options.drop_tool_results)
    assert messages == before
    check_slimmed(messages, out, options)


# --- the command line ----------------------------------------------------------------------


def cli(*args: str, db: Path) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k != "AGUI_STORE_DB"}
    return subprocess.run([sys.executable, "-m", "agui_store", "--db", str(db), *args],
                          capture_output=True, text=True, env=env, timeout=120)


@pytest.fixture(scope="module")
def demo_db(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    db = tmp_path_factory.mktemp("slim") / "store.db"
    with Store(db) as store:
        thread, _ = record_demo(store)
    return db, thread


def test_the_slim_command_prints_the_preset_as_json(demo_db: tuple[Path, str]) -> None:
    db, thread = demo_db
    done = cli("slim", "run-2", "--thread", thread, "--preset", "minimal", db=db)
    assert done.returncode == 0, done.stderr
    with Store(db) as store:
        expected = slim(store.checkout("run-2", thread_id=thread), "minimal")
    assert json.loads(done.stdout) == expected


def test_the_slim_command_takes_last_and_max_content_over_the_preset(
    demo_db: tuple[Path, str],
) -> None:
    db, thread = demo_db
    done = cli("slim", "run-2", "--thread", thread, "--last", "1", "--max-content", "10", db=db)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == [
        {"id": "assistant-4", "role": "assistant", "content": "Porto is " + TRUNCATION_MARKER}]


def test_the_slim_command_defaults_to_the_standard_preset_and_head(
    demo_db: tuple[Path, str],
) -> None:
    db, thread = demo_db
    done = cli("slim", "--thread", thread, db=db)
    assert done.returncode == 0, done.stderr
    with Store(db) as store:
        assert json.loads(done.stdout) == store.checkout("HEAD", thread_id=thread).messages


def test_the_slim_command_refuses_a_negative_count_and_an_unknown_preset(
    demo_db: tuple[Path, str],
) -> None:
    db, thread = demo_db
    done = cli("slim", "run-2", "--thread", thread, "--last", "-1", db=db)
    assert done.returncode == 2 and "--last: expected an integer >= 0, not -1" in done.stderr
    done = cli("slim", "run-2", "--thread", thread, "--preset", "tiny", db=db)
    assert done.returncode == 2 and "invalid choice" in done.stderr
    text = cli("slim", "-h", db=db).stdout
    assert "example: agui-store slim" in text
