"""Inputs that resend the whole history (HttpAgent): validated once per chunk of messages.

A store remembers the addresses of the 64-message chunks it validated; an input that resends
them validates only what it adds. These tests hold it to the rule that nothing else changes:
an input is accepted exactly when a store that never saw the history accepts it, and is
refused with the same error.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import agui_store
from agui_store.errors import InvalidEventError
from agui_store.protocol import validate

CHUNK = 64


def user(i: int) -> dict[str, Any]:
    return {"id": f"m{i}", "role": "user", "content": f"message {i}"}


def body(run: int, messages: list[Any]) -> dict[str, Any]:
    return {
        "threadId": "t",
        "runId": f"run-{run}",
        "messages": messages,
        "state": {},
        "tools": [],
        "context": [],
        "forwardedProps": {},
    }


def events(run: int) -> list[dict[str, Any]]:
    return [
        {"type": "RUN_STARTED", "threadId": "t", "runId": f"run-{run}"},
        {"type": "RUN_FINISHED", "threadId": "t", "runId": f"run-{run}"},
    ]


#: Messages no RunAgentInput may hold, each for its own reason.
INVALID = [
    {"id": 5, "role": "user", "content": "an id that is not a string"},
    {"id": "x", "role": "user"},
    {"id": "x", "role": "assistant", "toolCalls": "not a list"},
    {"id": "x", "role": "tool", "content": "a tool message without its call"},
    "not an object",
    None,
]


def refusal(store: agui_store.Store, run: int, sent: list[Any]) -> str | None:
    try:
        store.append(events(run), input=body(run, sent))
    except InvalidEventError as e:
        return str(e)
    return None


def test_a_resent_history_is_validated_once_and_only_the_new_messages_after(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    history = [user(i) for i in range(2 * CHUNK + 5)]
    seen: list[int] = []
    real = validate.validate_input

    def counting(obj: Any) -> None:  # a spy: the real validation runs
        seen.append(len(obj["messages"]))
        real(obj)

    monkeypatch.setattr(validate, "validate_input", counting)
    with agui_store.open(str(tmp_path / "s.db")) as store:
        store.append(events(0), input=body(0, history))
        store.append(events(1), input=body(1, [*history, user(1000)]))
        assert store.input("run-1", thread_id="t") == body(1, [*history, user(1000)])
    # The first input whole; the second: its 2 full chunks known, the rest (5 + 1) checked.
    assert seen == [2 * CHUNK + 5, 6]


def test_an_invalid_message_after_a_resent_history_is_refused_as_in_a_fresh_store(
    tmp_path: Path,
) -> None:
    history = [user(i) for i in range(CHUNK * 2)]
    sent = [*history, INVALID[0]]
    with agui_store.open(str(tmp_path / "fresh.db")) as fresh:
        expected = refusal(fresh, 1, sent)
    assert expected is not None and "$.messages[128]" in expected
    with agui_store.open(str(tmp_path / "warm.db")) as store:
        assert refusal(store, 0, history) is None
        assert refusal(store, 1, sent) == expected
        # Nothing was written: the run is not there, and the thread goes on.
        assert [r.run_id for r in store.runs("t")] == ["run-0"]
        assert refusal(store, 1, [*history, user(1000)]) is None


@settings(
    max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    length=st.integers(min_value=CHUNK, max_value=3 * CHUNK + 10),
    at=st.integers(min_value=0),
    bad=st.sampled_from(INVALID),
    warm=st.booleans(),
)
def test_an_input_is_refused_exactly_as_a_store_that_never_saw_its_history_refuses_it(
    tmp_path_factory: pytest.TempPathFactory, length: int, at: int, bad: Any, warm: bool
) -> None:
    """Whichever message is broken (in a chunk validated before, in one not seen, or after
    the last full chunk), the error is the one validating the whole input gives."""
    history = [user(i) for i in range(length)]
    broken = list(history)
    broken[at % length] = bad
    with pytest.raises(InvalidEventError) as whole:
        validate.validate_input(body(1, broken))
    path = tmp_path_factory.mktemp("inputs")
    with agui_store.open(str(path / "s.db")) as store:
        if warm:  # the chunks of the history validated, and remembered
            assert refusal(store, 0, history) is None
        assert refusal(store, 1, broken) == str(whole.value)
        assert refusal(store, 1, [*history, user(1000)]) is None
        assert store.input("run-1", thread_id="t") == body(1, [*history, user(1000)])
