"""Names and revisions: every name the store keeps reads back as the revision it was given as.

A branch name follows git's check-ref-format (no trailing newline, no control characters, no
whitespace); a run id and a ref name never shadow each other, whichever came first; ids are
never empty; an input names the run it belongs to.
"""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import agui_store
from agui_store import (
    AmbiguousRunError,
    ArgumentTypeError,
    BranchError,
    InvalidArgumentError,
    InvalidEventError,
    cli,
)
from tests.backends import dump
from tests.workers.harness import scale

SOME = settings(
    max_examples=scale(dev=60, ci=300), suppress_health_check=[HealthCheck.too_slow], deadline=None
)


def run(run_id: str, thread_id: str = "t", **extra: Any) -> list[dict[str, Any]]:
    return [
        {"type": "RUN_STARTED", "threadId": thread_id, "runId": run_id, **extra},
        {"type": "RUN_FINISHED", "threadId": thread_id, "runId": run_id},
    ]


@pytest.fixture
def store(store_location: str) -> Any:
    with agui_store.open(store_location) as s:
        s.append(run("r1"))
        yield s


# --- branch names -----------------------------------------------------------------------

REFUSED_NAMES = [
    "retry\n", "\nretry", "re\ttry", "re try", " retry", "retry ", "re\x00try", "re\x7ftry",
    "re\u2028try", "ré", "a..b", ".hidden", "a/.b", "x.lock", "a/x.lock/b", "a//b", "/a",
    "a/", "a.", "@", "-x", "a~1", "a^", "a:b", "a?", "a*", "a[b", "a\\b", "", "x" * 256,
    "HEAD", "main",
]


@pytest.mark.parametrize("name", REFUSED_NAMES, ids=repr)
def test_a_branch_name_that_would_not_read_back_as_a_revision_is_refused(
    store: Any, store_location: str, name: str
) -> None:
    before = dump(store_location)
    with pytest.raises(BranchError):
        store.branch(name, "r1", thread_id="t")
    with pytest.raises(BranchError):
        store.append(run("r2"), branch=name)
    assert dump(store_location) == before


@pytest.mark.parametrize("name", ["retry", "feature/x-2", "v1.2", "a@b", "x+y", "_", "x" * 255])
def test_ordinary_branch_names_are_kept(store: Any, name: str) -> None:
    store.branch(name, "r1", thread_id="t")
    assert store.checkout(name, thread_id="t").run.run_id == "r1"


_ALLOWED = set("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._/@+-")


def _reads_back(name: str) -> bool:
    """The documented rule, written out component by component (not as the store's regex)."""
    if not 1 <= len(name) <= 255 or not set(name) <= _ALLOWED or name in ("HEAD", "main", "@"):
        return False
    if name.startswith("-") or name.endswith(".") or ".." in name:
        return False
    parts = name.split("/")
    return all(p and not p.startswith(".") and not p.endswith(".lock") for p in parts)


@settings(SOME, suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(name=st.text(st.sampled_from("ab.-/@+_~ \n\t;é") | st.characters(), max_size=12))
def test_every_branch_name_is_kept_exactly_when_the_documented_rule_says_so(
    new_location: Any, name: str
) -> None:
    with agui_store.open(new_location()) as store:
        store.append(run("r1"))
        try:
            store.branch(name, "r1", thread_id="t")
        except BranchError:
            assert not _reads_back(name) or name == "r1", name  # r1: the run's own id
            return
        assert _reads_back(name), name
        assert [b.name for b in store.branches("t") if not b.default] == [name]
        assert store.checkout(name, thread_id="t").run.run_id == "r1"


# --- run ids and refs -------------------------------------------------------------------


def test_a_run_named_like_an_existing_branch_is_refused(store: Any, store_location: str) -> None:
    store.branch("retry", "r1", thread_id="t")
    before = dump(store_location)
    with pytest.raises(InvalidEventError) as caught:
        store.append(run("r2") + run("retry"))
    assert (caught.value.index, caught.value.event_type, caught.value.path) == (
        2, "RUN_STARTED", "$.runId"
    )
    assert "branch" in str(caught.value)
    assert dump(store_location) == before
    assert store.checkout("retry", thread_id="t").run.run_id == "r1"
    store.delete_branch("retry", thread_id="t")  # the fix the message names
    store.append(run("retry"))
    assert store.checkout("retry", thread_id="t").run.run_id == "retry"


def test_a_branch_named_like_an_existing_run_is_refused(store: Any, store_location: str) -> None:
    store.append(run("r2"))
    before = dump(store_location)
    with pytest.raises(BranchError, match="is the id of run 'r2' of thread 't'"):
        store.branch("r2", "r1", thread_id="t")
    with pytest.raises(BranchError, match="is the id of run 'r1' of thread 't'"):
        store.append(run("r3"), branch="r1")
    with pytest.raises(BranchError, match="is the id of run 'r3' of thread 't'"):
        store.append(run("r3"), branch="r3")  # the run the same batch records
    assert dump(store_location) == before
    assert store.checkout("r2", thread_id="t").run.run_id == "r2"


def test_a_branch_named_like_a_short_hash_of_a_run_is_refused(
    store: Any, store_location: str
) -> None:
    """A branch wins over a short hash as a revision: it would hide the run it abbreviates
    (git warns of the ambiguity; the store refuses it)."""
    short = store.get_run("r1", thread_id="t").short_hash
    before = dump(store_location)
    for name in (short[:4], short, short.upper()):
        with pytest.raises(BranchError, match="begins the content hash of run 'r1'"):
            store.branch(name, "r1", thread_id="t")
    assert dump(store_location) == before
    assert store.get_run(short[:6], thread_id="t").run_id == "r1"
    store.branch("cafe-hotel", "r1", thread_id="t")  # hex-like, not a hash: kept


@pytest.mark.parametrize("ref", ["HEAD", "main", "@"])
def test_a_run_named_like_a_ref_every_thread_has_is_refused(
    store: Any, store_location: str, ref: str
) -> None:
    before = dump(store_location)
    with pytest.raises(InvalidEventError, match="ref every thread has") as caught:
        store.append(run(ref))
    assert caught.value.path == "$.runId"
    with pytest.raises(InvalidEventError):
        store.append(run(ref, thread_id="other"))
    assert dump(store_location) == before
    with pytest.raises(InvalidArgumentError, match="newest run"):
        store.fork("HEAD", run_id=ref, thread_id="t")


def test_a_run_id_and_a_branch_of_another_thread_need_a_thread_to_tell_them_apart(
    store: Any,
) -> None:
    store.append(run("r9", thread_id="u"))
    store.branch("x", "r9", thread_id="u")
    store.append(run("x"))  # thread t: its own run x, no branch x there
    with pytest.raises(AmbiguousRunError, match="run of thread 't' and a branch of thread 'u'"):
        store.checkout("x")
    assert store.checkout("x", thread_id="t").run.run_id == "x"
    assert store.checkout("x", thread_id="u").run.run_id == "r9"


# --- empty ids and inputs ---------------------------------------------------------------


@pytest.mark.parametrize("field", ["runId", "threadId"])
def test_an_empty_run_or_thread_id_is_refused(store: Any, store_location: str, field: str) -> None:
    events = run("r2")
    events[0][field] = ""
    before = dump(store_location)
    with pytest.raises(InvalidEventError, match="empty") as caught:
        store.append(events)
    assert (caught.value.index, caught.value.path) == (0, f"$.{field}")
    with pytest.raises(InvalidEventError, match="empty"):
        store.append([{"type": "RUN_ERROR", "message": "x"}], thread_id="")
    assert dump(store_location) == before


def _input(run_id: str, thread_id: str = "t") -> dict[str, Any]:
    return {"threadId": thread_id, "runId": run_id, "state": {}, "messages": [], "tools": [],
            "context": [], "forwardedProps": {}}


def test_an_input_for_another_run_is_refused_as_one_for_another_thread_is(
    store: Any, store_location: str
) -> None:
    before = dump(store_location)
    with pytest.raises(InvalidEventError, match="names run 'other'") as caught:
        store.append(run("r2"), input=_input("other"))
    assert caught.value.path == "input.runId"
    with pytest.raises(InvalidEventError, match="names thread"):
        store.append(run("r2"), input=_input("r2", thread_id="u"))
    assert dump(store_location) == before
    store.append(run("r2") + run("r3"), input=_input("r2"))  # the batch's first run
    assert store.input("r2", thread_id="t") is not None
    assert store.input("r3", thread_id="t") is None


@pytest.mark.parametrize("name", [5, "a..b"])
def test_a_bad_branch_name_is_named_before_a_missing_run_as_git_names_it(
    store: Any, name: Any
) -> None:
    with pytest.raises((ArgumentTypeError, BranchError)):  # not RunNotFoundError
        store.branch(name, "no-such-run", thread_id="t")


# --- the command line -------------------------------------------------------------------


@pytest.mark.parametrize(
    "argv",
    [
        ["branch", "retry\n", "r1", "--thread", "t"],
        ["branch", "r1", "r1", "--thread", "t"],
        ["branch", "main", "r1", "--thread", "t"],
    ],
    ids=["newline", "shadows-a-run", "reserved"],
)
def test_the_command_line_says_what_is_wrong_in_one_line(
    store: Any, store_location: str, argv: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    assert cli.main(["--db", store_location, *argv], out=io.StringIO()) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("agui-store branch: "), err


def test_importing_a_run_named_like_a_branch_fails_in_one_line(
    store: Any, store_location: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    store.branch("retry", "r1", thread_id="t")
    recording = tmp_path / "rec.jsonl"
    recording.write_text("\n".join(json.dumps(e) for e in run("retry")))
    assert cli.main(["--db", store_location, "import", str(recording)], out=io.StringIO()) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "$.runId" in err and "branch" in err, err


def test_a_branch_named_like_the_start_of_run_ids_is_made_with_a_warning_naming_them(
    store: Any, store_location: str, capsys: pytest.CaptureFixture[str]
) -> None:
    for run_id in ("r2", "r3", "r4", "other"):
        store.append(run(run_id))
    argv = ["--db", store_location, "branch", "--thread", "t"]
    assert cli.main([*argv, "r", "r2"], out=io.StringIO()) == 0
    err = capsys.readouterr().err
    assert err == (
        "agui-store branch: warning: branch name 'r' begins the ids of runs 'r1', 'r2', "
        "'r3', ...: as a revision 'r' names the branch, so name those runs by more of their "
        "ids\n"
    ), err
    assert store.get_run("r", thread_id="t").run_id == "r2"  # the branch, as git's ref wins
    assert cli.main([*argv, "-m", "r", "ot"], out=io.StringIO()) == 0
    assert "branch name 'ot' begins the id of run 'other': as a revision 'ot' names the " \
        "branch, so name that run by more of its id\n" in capsys.readouterr().err
    assert cli.main([*argv, "idea", "r3"], out=io.StringIO()) == 0
    assert capsys.readouterr().err == ""


# Values a hurried caller passes where a branch name goes: hashable or not, text-like or not.
NOT_TEXT = st.one_of(
    st.none(), st.booleans(), st.integers(), st.floats(allow_nan=True), st.binary(max_size=8),
    st.lists(st.text(max_size=4), max_size=3), st.tuples(st.text(max_size=4)),
    st.dictionaries(st.text(max_size=4), st.integers(), max_size=2),
    st.datetimes(), st.timedeltas(), st.builds(object),
)


@settings(SOME, suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(name=NOT_TEXT)
def test_a_branch_name_that_is_not_text_is_refused_by_every_verb_that_takes_one(
    store: Any, store_location: str, name: Any
) -> None:
    store.branch("keep", "r1", thread_id="t")
    before = dump(store_location)
    for call in (
        lambda: store.branch(name, "r1", thread_id="t"),
        lambda: store.delete_branch(name, thread_id="t"),
        lambda: store.rename_branch(name, "other", thread_id="t"),
        lambda: store.rename_branch("keep", name, thread_id="t"),
    ):
        with pytest.raises(ArgumentTypeError, match="a branch name is text") as refused:
            call()
        assert not isinstance(refused.value, BranchError)  # a wrong type, not a bad name
    if name is not None:  # None is append's default: no branch
        with pytest.raises(ArgumentTypeError, match="a branch name is text"):
            store.append(run("r2"), branch=name)
    assert dump(store_location) == before
