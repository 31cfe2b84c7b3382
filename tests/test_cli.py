"""The command line through its real entry point, on real files."""

from __future__ import annotations

import contextlib
import json
import os
import re
import shlex
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import FIXTURE_STREAMS


def _thread_ids(cli: Any, db: Path) -> list[str]:
    """The thread ids ``threads --json`` lists, sorted."""
    return sorted(t["threadId"] for t in json.loads(cli("threads", "--json", db=db).stdout))


def cli(
    *args: str, db: Path | None = None, ok: bool = True, cwd: Path | None = None
) -> subprocess.CompletedProcess[str]:
    argv = [sys.executable, "-m", "agui_store", *args]
    if db is not None:
        argv += ["--db", str(db)]
    env = {k: v for k, v in os.environ.items() if k != "AGUI_STORE_DB"}
    proc = subprocess.run(argv, capture_output=True, text=True, cwd=cwd, env=env, timeout=120)
    if ok:
        assert proc.returncode == 0, proc.stderr
    return proc


def test_demo_records_a_branched_conversation_into_the_default_file(tmp_path: Path) -> None:
    out = cli("demo", cwd=tmp_path).stdout
    assert (tmp_path / "agui-store.db").exists()
    assert "* run-3 (main, fahrenheit)" in out and "|/" in out and "* run-1" in out
    assert "user: Can you give me that in Fahrenheit?" in out
    assert '"units": "fahrenheit"' in out


def test_the_demo_names_two_branches_that_differ_prints_their_diff_and_ends_with_the_viewer(
    tmp_path: Path,
) -> None:
    out = cli("demo", cwd=tmp_path).stdout
    thread = json.loads(cli("threads", "--json", cwd=tmp_path).stdout)[0]["threadId"]
    branches = json.loads(cli("branches", thread, "--json", cwd=tmp_path).stdout)
    named = {b["name"]: b["runId"] for b in branches if not b["default"]}
    assert named == {"porto": "run-2", "fahrenheit": "run-3"}
    assert "* run-2 (porto)" in out
    diff = out.split(f"$ agui-store diff porto fahrenheit --thread {thread}\n", 1)[1]
    assert "+ [user-2] user: And in Porto?" in diff and "+ [user-3]" in diff
    last = out.rstrip().splitlines()[-1]
    assert last == f"see it in the browser: agui-store ui --thread {thread}"


def test_every_command_has_help_with_an_example() -> None:
    for command in (
        "import",
        "threads",
        "runs",
        "log",
        "show",
        "branch",
        "branches",
        "compact",
        "rebuild",
        "export",
        "check",
        "demo",
        "ui",
        "search",
    ):
        text = cli(command, "-h").stdout
        assert "example: agui-store" in text, command


def sse_file(path: Path, events: list[dict[str, Any]]) -> Path:
    path.write_text("".join(f"data: {json.dumps(e)}\r\n\r\n" for e in events), encoding="utf-8")
    return path


@pytest.mark.skipif(not FIXTURE_STREAMS, reason="no upstream recordings in ../shared/fixtures")
@pytest.mark.parametrize("fmt", ["json", "jsonl", "sse"])
def test_import_then_export_round_trips_a_recording_in_every_format(
    tmp_path: Path, fmt: str
) -> None:
    _, events = max(FIXTURE_STREAMS, key=lambda s: len(s[1]))
    db = tmp_path / "s.db"
    source = tmp_path / f"in.{fmt}"
    if fmt == "json":
        source.write_text(json.dumps(events))
    elif fmt == "jsonl":
        source.write_text("\n".join(json.dumps(e) for e in events) + "\n")
    else:
        sse_file(source, events)
    assert "imported" in cli("import", str(source), db=db).stdout
    tid = events[0]["threadId"]
    last_run = [e for e in events if e["type"] == "RUN_STARTED"][-1]["runId"]
    out = tmp_path / f"out.{fmt}"
    cli("export", last_run, "--thread", tid, "--format", fmt, "-o", str(out), db=db)
    db2 = tmp_path / "again.db"
    cli("import", str(out), db=db2)
    shown = [
        json.loads(cli("show", last_run, "--thread", tid, "--json", db=d).stdout) for d in (db, db2)
    ]
    assert shown[0]["messages"] == shown[1]["messages"] and shown[0]["state"] == shown[1]["state"]


def test_log_show_branch_and_compacted_export_work_together(tmp_path: Path) -> None:
    db = tmp_path / "s.db"
    events = []
    for i in range(3):
        events += [
            {"type": "RUN_STARTED", "threadId": "t", "runId": f"r{i}"},
            {"type": "TEXT_MESSAGE_START", "messageId": f"m{i}", "role": "assistant"},
            {"type": "TEXT_MESSAGE_CONTENT", "messageId": f"m{i}", "delta": f"reply {i}"},
            {"type": "TEXT_MESSAGE_END", "messageId": f"m{i}"},
            {"type": "RUN_FINISHED", "threadId": "t", "runId": f"r{i}"},
        ]
    cli("import", str(sse_file(tmp_path / "s.sse", events)), db=db)
    table = cli("threads", db=db).stdout.splitlines()
    assert table[0].split() == ["THREAD", "OWNER", "RUNS", "BRANCHES", "LAST", "ACTIVITY",
                                "FIRST", "WORDS"]
    assert [row.split()[:4] for row in table[1:]] == [["t", "-", "3", "0"]]
    runs = cli("runs", "--thread", "t", db=db).stdout
    assert [line.split()[0] for line in runs.splitlines()] == [
        "r0",
        "r1",
        "r2",
    ]
    assert [line.split()[0] for line in cli("log", "HEAD", db=db).stdout.splitlines()] == [
        "r2",
        "r1",
        "r0",
    ]
    cli("branch", "alt", "r1", "--thread", "t", db=db)
    assert "alt -> r1" in cli("branches", "--thread", "t", db=db).stdout
    assert "assistant: reply 1" in cli("show", "alt", db=db).stdout
    exported = cli("export", "r2", "--reconnect-stream", db=db)
    compacted = [json.loads(line) for line in exported.stdout.splitlines()]
    # The flag's old name gives the same stream, and says it is going.
    old_name = cli("export", "r2", "--compacted", db=db)
    assert old_name.stdout == exported.stdout and "--reconnect-stream" in old_name.stderr
    assert [e["type"] for e in compacted] == [
        "RUN_STARTED",
        "MESSAGES_SNAPSHOT",
        "STATE_SNAPSHOT",
        "RUN_FINISHED",
    ]
    assert [m["content"] for m in compacted[1]["messages"]] == ["reply 0", "reply 1", "reply 2"]
    cli("branch", "alt", "--delete", "--thread", "t", db=db)
    assert "alt" not in cli("branches", "--thread", "t", db=db).stdout
    graph = cli("log", "--graph", "--thread", "t", db=db).stdout
    assert [line.split()[1] for line in graph.splitlines()] == ["r2", "r1", "r0"]


def test_show_says_why_a_failed_run_failed_and_json_carries_it(tmp_path: Path) -> None:
    db = tmp_path / "s.db"
    events = tmp_path / "failed.jsonl"
    lines = [
        {"type": "RUN_STARTED", "threadId": "t", "runId": "ok"},
        {"type": "RUN_FINISHED", "threadId": "t", "runId": "ok"},
        {"type": "RUN_STARTED", "threadId": "t", "runId": "bad"},
        {"type": "TEXT_MESSAGE_START", "messageId": "m", "role": "assistant"},
        {"type": "TEXT_MESSAGE_CONTENT", "messageId": "m", "delta": "Looking"},
        {"type": "RUN_ERROR", "message": "rate limit exceeded", "code": "rate_limited"},
    ]
    events.write_text("".join(json.dumps(e) + "\n" for e in lines))
    cli("import", str(events), db=db)
    shown = cli("show", "bad", "--thread", "t", db=db).stdout.splitlines()
    assert shown[:2] == [
        f"run bad [{shown[0].split('[')[1].split(']')[0]}] (thread t) - error",
        "error: rate limit exceeded (code rate_limited)",
    ]
    assert "assistant: Looking" in shown
    failed = json.loads(cli("show", "bad", "--thread", "t", "--json", db=db).stdout)
    assert failed["runError"] == {"message": "rate limit exceeded", "code": "rate_limited"}
    finished = cli("show", "ok", "--thread", "t", db=db).stdout
    assert "error:" not in finished
    # An error of several lines stays the one line under the first: its newlines escaped.
    events.write_text("".join(json.dumps(e) + "\n" for e in [
        {"type": "RUN_STARTED", "threadId": "t", "runId": "worse"},
        {"type": "RUN_ERROR", "message": "upstream said:\n502 Bad Gateway", "code": "a\tb"},
    ]))
    cli("import", str(events), db=db)
    shown = cli("show", "worse", "--thread", "t", db=db).stdout.splitlines()
    assert shown[1] == "error: upstream said:\\n502 Bad Gateway (code a\\tb)"
    assert shown[2] == ""
    assert "runError" not in json.loads(cli("show", "ok", "--thread", "t", "--json", db=db).stdout)


def test_errors_are_one_line_on_stderr_with_exit_code_1(tmp_path: Path) -> None:
    db = tmp_path / "s.db"
    bad = tmp_path / "bad.jsonl"
    bad.write_text(
        '{"type": "RUN_STARTED", "threadId": "t", "runId": "r"}\n{"type": "TEXT_MESSAGE_START"}\n'
    )
    proc = cli("import", str(bad), db=db, ok=False)
    assert proc.returncode == 1
    assert "event 1 (TEXT_MESSAGE_START)" in proc.stderr and "messageId" in proc.stderr
    assert not db.exists()  # the store the import created for nothing is gone again
    proc = cli("show", "nope", db=db, ok=False)
    assert proc.returncode == 1 and "no store at" in proc.stderr
    _two_threads(db)
    proc = cli("show", "nope", db=db, ok=False)
    assert proc.returncode == 1 and "nope" in proc.stderr
    assert cli("check", db=db).stdout.startswith("ok")


@pytest.mark.parametrize("command", ["export", "export-artifact"])
def test_an_output_path_naming_the_store_or_a_database_is_refused_and_nothing_changes(
    tmp_path: Path, command: str
) -> None:
    db = tmp_path / "chat.db"
    cli("demo", db=db)
    other = tmp_path / "other.db"
    cli("demo", db=other)
    (tmp_path / "link-to-store").symlink_to(db)
    (tmp_path / "link-to-other").symlink_to(other)
    before = {p: p.read_bytes() for p in (db, other)}
    thread = json.loads(cli("threads", "--json", db=db).stdout)[0]["threadId"]
    for target in [db, tmp_path / "link-to-store", tmp_path / ".." / tmp_path.name / "chat.db",
                   other, tmp_path / "link-to-other", tmp_path]:
        proc = cli(command, "HEAD", "--thread", thread, "-o", str(target), db=db, ok=False)
        assert proc.returncode == 1, (target, proc.stderr)
        assert proc.stderr.count("\n") == 1 and "Traceback" not in proc.stderr, proc.stderr
        assert str(target) in proc.stderr
    assert {p: p.read_bytes() for p in (db, other)} == before
    assert cli("check", db=db).returncode == 0


def test_an_export_replaces_a_plain_file_through_a_symlink_and_keeps_the_link(
    tmp_path: Path,
) -> None:
    db = tmp_path / "chat.db"
    cli("demo", db=db)
    real = tmp_path / "history.jsonl"
    real.write_text("old\n", encoding="utf-8")
    link = tmp_path / "link.jsonl"
    link.symlink_to(real)
    thread = json.loads(cli("threads", "--json", db=db).stdout)[0]["threadId"]
    cli("export", "HEAD", "--thread", thread, "--format", "jsonl", "-o", str(link), db=db)
    assert link.is_symlink()
    lines = real.read_text(encoding="utf-8").splitlines()
    assert lines and json.loads(lines[0])["type"] == "RUN_STARTED"
    assert [p.name for p in tmp_path.iterdir() if p.name.endswith(".partial")] == []


def test_analyze_replace_refuses_a_database_it_did_not_write(tmp_path: Path) -> None:
    db, other = tmp_path / "chat.db", tmp_path / "other.db"
    cli("demo", db=db)
    cli("demo", db=other)
    before = other.read_bytes()
    proc = cli("analyze", str(other), "--replace", db=db, ok=False)
    assert proc.returncode == 1 and "not an agui-store analysis export" in proc.stderr
    assert other.read_bytes() == before
    out = tmp_path / "analysis.db"
    cli("analyze", str(out), db=db)
    cli("analyze", str(out), "--replace", db=db)  # its own earlier export may be replaced


def test_a_command_that_only_reads_refuses_a_store_path_that_names_no_file(
    tmp_path: Path,
) -> None:
    typo = tmp_path / "chta.db"
    for args in (["threads"], ["show", "HEAD"], ["check"], ["log"]):
        proc = cli(*args, db=typo, ok=False)
        assert proc.returncode == 1 and f"no store at {typo}" in proc.stderr, proc.stderr
    assert list(tmp_path.iterdir()) == []
    dangling = tmp_path / "link.db"
    dangling.symlink_to(tmp_path / "nowhere.db")  # a link to nothing: no store, nothing made
    proc = cli("threads", db=dangling, ok=False)
    assert proc.returncode == 1 and "a symbolic link to nothing" in proc.stderr, proc.stderr
    dangling.unlink()
    assert list(tmp_path.iterdir()) == []
    typo.touch()  # an empty file: no store either, and left empty
    for args in (["threads"], ["search", "hello"], ["check"]):
        proc = cli(*args, db=typo, ok=False)
        assert proc.returncode == 1 and "the file is empty" in proc.stderr, proc.stderr
    assert [p.name for p in tmp_path.iterdir()] == [typo.name] and typo.stat().st_size == 0
    cli("demo", db=typo)  # a command that creates a store takes it


def test_runs_and_branches_take_the_thread_as_every_command_does(tmp_path: Path) -> None:
    db = tmp_path / "s.db"
    cli("demo", db=db)
    thread = json.loads(cli("threads", "--json", db=db).stdout)[0]["threadId"]
    for command in ("runs", "branches"):
        proc = cli(command, "--thread", thread, db=db)
        assert proc.stdout and proc.stderr == "", command
        # The positional form still works, and says what to type instead.
        old = cli(command, thread, db=db)
        assert old.stdout == proc.stdout
        assert f"use agui-store {command} --thread {thread}" in old.stderr
        assert "deprecated" in old.stderr
        # One thread: it is the one; several: name one.
        assert cli(command, db=db).stdout == proc.stdout
        both = cli(command, thread, "--thread", "other", db=db, ok=False)
        assert both.returncode == 2 and "two threads" in both.stderr
    cli("demo", db=db)
    for command in ("runs", "branches"):
        missing = cli(command, db=db, ok=False)
        assert missing.returncode == 1 and "--thread" in missing.stderr


def test_every_command_that_takes_a_thread_takes_it_as_the_thread_option() -> None:
    from agui_store.cli import COMMANDS

    for command in COMMANDS:
        text = cli(command, "-h").stdout
        usage = text.split("\n\n")[0]
        assert "THREAD_ID" not in usage and "thread_id" not in usage, command
        if "--thread" in usage:
            assert "[--thread THREAD]" in usage, command
            described = [line for line in text.splitlines() if "--thread THREAD " in line]
            assert described and described[0].split("--thread THREAD")[1].strip(), command


def test_export_all_writes_the_archive_and_import_gives_back_the_store_then_adds_nothing(
    tmp_path: Path,
) -> None:
    db, other = tmp_path / "demo.db", tmp_path / "other.db"
    cli("demo", db=db)
    thread = json.loads(cli("threads", "--json", db=db).stdout)[0]["threadId"]
    archive = tmp_path / "thread.jsonl"
    done = cli("export", "--all", "--thread", thread, "-o", str(archive), db=db)
    assert done.stderr == (
        f"wrote {archive} (1 thread, 3 runs, 49 events, 2 branches, 0 conversations)\n"
    )
    assert json.loads(archive.read_text().splitlines()[0])["format"] == "agui-store-archive"
    first = cli("import", str(archive), db=other)
    assert first.stdout == (
        f"imported 1 thread, 3 runs, 49 events, 2 branches, 0 conversations into {other}\n"
    )
    assert first.stderr == ""
    again = cli("import", str(archive), "--json", db=other)
    assert json.loads(again.stdout) == {
        "threads": 0, "runs": 0, "events": 0, "branches": 0, "conversations": 0,
        "leftErased": 0, "store": str(other),
    }
    for ref in ("run-1", "run-2", "run-3"):
        shown = [cli("show", ref, "--thread", thread, "--json", db=d).stdout for d in (db, other)]
        assert shown[0] == shown[1]
    whole = cli("export", "--all", db=other).stdout.encode()
    assert whole == archive.read_bytes()  # the export of the imported store: the same bytes
    # A thread the store erased stays erased, unless the import is told to restore it.
    cli("delete", "--thread", thread, "--yes", db=other)
    left = cli("import", str(archive), db=other)
    assert left.stdout.startswith("imported 0 threads, 0 runs, 0 events")
    assert left.stderr == "left out 1 thread this store erased (--restore-erased imports them)\n"
    back = cli("import", str(archive), "--restore-erased", db=other)
    assert back.stdout.startswith("imported 1 thread, 3 runs, 49 events, 2 branches")
    assert cli("export", "--all", db=other).stdout.encode() == archive.read_bytes()


def test_an_archive_cut_before_its_header_is_refused_as_an_archive_not_read_as_events(
    tmp_path: Path,
) -> None:
    db = tmp_path / "demo.db"
    cli("demo", db=db)
    archive = tmp_path / "all.jsonl"
    cli("export", "--all", "-o", str(archive), db=db)
    cut = tmp_path / "cut.jsonl"
    cut.write_text("".join(archive.read_text().splitlines(keepends=True)[1:]))
    refused = cli("import", str(cut), db=tmp_path / "new.db", ok=False)
    assert refused.returncode == 1
    assert refused.stderr == (
        f"agui-store import: {cut}, line 1: an archive's record, but not its header line: the "
        "archive was cut at its start or edited; nothing was imported\n"
    )
    assert not (tmp_path / "new.db").exists()


def test_an_ag_ui_export_or_import_says_what_it_leaves_out(tmp_path: Path) -> None:
    db, other = tmp_path / "demo.db", tmp_path / "other.db"
    cli("demo", db=db)
    thread = json.loads(cli("threads", "--json", db=db).stdout)[0]["threadId"]
    events = tmp_path / "thread.json"
    done = cli("export", "--all", "--thread", thread, "--format", "json", "-o", str(events),
               db=db)  # fmt: skip
    assert "holds the thread's events only" in done.stderr
    imported = cli("import", str(events), db=other)
    assert "lineage was inferred" in imported.stderr and "no recorded inputs" in imported.stderr
    cli("demo", db=db)  # a second thread: the events of which one, --thread says
    refused = cli("export", "--all", "--format", "sse", db=db, ok=False)
    assert refused.returncode == 1 and "name one with --thread" in refused.stderr
    refused = cli("export", "run-1", "--thread", thread, "--format", "archive", db=db, ok=False)
    assert refused.returncode == 2 and "export --all" in refused.stderr


def _two_threads(db: Path) -> None:
    import agui_store
    from tests.streams import run, say

    with agui_store.open(db) as store:
        store.append(run("gone", "g1", *say("m1", "forget me")), scope="alice")
        store.append(run("kept", "k1", *say("m2", "keep me")))


def test_export_all_with_json_of_a_store_of_threads_says_json_takes_one_thread(
    tmp_path: Path,
) -> None:
    db = tmp_path / "s.db"
    _two_threads(db)
    refused = cli("export", "--all", "--json", db=db, ok=False)
    assert refused.returncode == 2 and not refused.stdout
    assert "--json is --format json, which holds one thread's events" in refused.stderr
    assert "export --all without --json" in refused.stderr
    one = cli("export", "--all", "--json", "--thread", "kept", db=db).stdout
    assert [e["runId"] for e in json.loads(one) if e["type"] == "RUN_STARTED"] == ["k1"]


def test_delete_and_prune_refuse_without_yes_and_a_terminal_and_erase_nothing(
    tmp_path: Path,
) -> None:
    db = tmp_path / "s.db"
    _two_threads(db)
    before = db.read_bytes()
    for args in (
        ("delete", "--thread", "gone"),
        ("delete", "--owner", "alice"),
        ("prune", "--older-than", "0d"),
        ("prune", "--older-than", "36h"),
    ):
        proc = cli(*args, db=db, ok=False)
        assert proc.returncode == 2 and "without --yes" in proc.stderr, args
        assert "0:00" not in proc.stderr  # an age as typed, not a Python timedelta
        assert args[0] != "prune" or (
            f"every thread and conversation idle for longer than {args[-1].replace('0d', '0s')} "
            in proc.stderr
        )
        assert proc.stderr.count("\n") == 1 and not proc.stdout
    assert _thread_ids(cli, db) == ["gone", "kept"]
    assert db.read_bytes() == before
    bad = cli("prune", "--older-than", "90 days", db=db, ok=False)
    assert bad.returncode == 2 and "is not an age" in bad.stderr
    assert cli("delete", db=db, ok=False).returncode == 2


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (("prune", "--older-than", "99999999999999999999d"), "too long an age"),
        (("prune", "--older-than", "1000000000d"), "too long an age"),
        (("prune", "--older-than", "\u0664d"), "is not an age"),  # an Arabic-Indic 4
        (("delete", "--owner", ""), "expected an owner's name"),
        (("prune", "--older-than", "1d", "--owner", ""), "expected an owner's name"),
        (("search", "me", "--owner", ""), "expected an owner's name"),
        (("search", "me", "--limit", "1001"), "from 1 to 1,000"),
        (("search", "me", "--cursor", "abc"), "expected the cursor"),
        (("search", "me", "--cursor", "99999999999999999999"), "which is past every cursor"),
        (("search", "me", "--cursor", "\u0664\u0662"), "expected the cursor"),
        (("delete", "--thread", ""), "expected a thread id"),
        (("search", "me", "--thread", ""), "expected a thread id"),
        (("threads", "--before", ""), "argument --before: expected a thread id"),
        (("export", "--all", "-o", ""), "expected a file path"),
        (("analyze", ""), "expected a file path"),
        # argparse takes a value that begins with - for an option: the line says how to give it
        (("prune", "--older-than", "-5d"), "a value that begins with - goes after =: "
                                           "--older-than=-5d;"),
        (("export", "-o", "-x", "--all"), "goes after =: --output=-x;"),
        (("search", "me", "--thread", "-t"), "goes after =: --thread=-t;"),
    ],
)
def test_an_option_value_out_of_range_is_a_usage_error_of_one_line(
    tmp_path: Path, args: tuple[str, ...], says: str
) -> None:
    db = tmp_path / "s.db"
    _two_threads(db)
    proc = cli(*args, "--json" if args[0] in ("search", "threads") else "--dry-run", db=db,
               ok=False)
    assert proc.returncode == 2 and says in proc.stderr, proc.stderr
    assert proc.stderr.count("\n") == 1 and "Traceback" not in proc.stderr


def test_an_erasure_that_finds_nothing_erases_nothing_and_claims_no_purge_left(
    tmp_path: Path,
) -> None:
    db = tmp_path / "s.db"
    _two_threads(db)
    done = json.loads(cli("delete", "--owner", "nobody", "--yes", "--json", db=db).stdout)
    assert (done["threads"], done["purged"]) == (0, True)
    text = cli("prune", "--older-than", "999d", "--yes", db=db).stdout
    assert text.strip() == "erased 0 thread(s), 0 run(s), 0 event(s), 0 conversation(s), 0 bytes"
    assert _thread_ids(cli, db) == ["gone", "kept"]


def test_delete_dry_run_says_what_would_go_and_yes_erases_it_with_a_json_receipt(
    tmp_path: Path,
) -> None:
    db = tmp_path / "s.db"
    _two_threads(db)
    dry = json.loads(cli("delete", "--owner", "alice", "--dry-run", "--json", db=db).stdout)
    assert dry["dryRun"] and dry["threads"] == 1 and not dry["purged"]
    assert _thread_ids(cli, db) == ["gone", "kept"]
    done = json.loads(cli("delete", "--owner", "alice", "--yes", "--json", db=db).stdout)
    assert {k: v for k, v in done.items() if k not in ("dryRun", "purged")} == {
        k: v for k, v in dry.items() if k not in ("dryRun", "purged")
    }
    assert done["purged"] and not done["dryRun"]
    assert _thread_ids(cli, db) == ["kept"]
    report = json.loads(cli("check", "--json", db=db).stdout)
    assert report["ok"] and [e["verb"] for e in report["erasures"]] == ["delete_owner"]
    text = cli("prune", "--older-than", "0s", "--yes", db=db).stdout
    assert text.startswith("erased 1 thread(s), 1 run(s)") and "purge finished" in text


def test_check_lists_each_erasure_with_everything_it_counted(tmp_path: Path) -> None:
    db = tmp_path / "s.db"
    _two_threads(db)
    cli("delete", "--thread", "gone", "--yes", db=db)
    lines = cli("check", db=db).stdout.splitlines()
    assert lines[0].startswith("ok (")
    assert re.fullmatch(
        r"erasure #1: delete_thread at \d{4}-\d\d-\d\dT[0-9:.]+\+00:00: 1 thread, 1 run, 5 "
        r"events, 0 conversations, "
        r"\d+ bytes", lines[1]
    ), lines


def test_delete_asks_on_a_terminal_and_erases_only_on_yes(tmp_path: Path) -> None:
    import pty

    db = tmp_path / "s.db"
    _two_threads(db)

    def answer(reply: str) -> tuple[int, str]:
        main, secondary = pty.openpty()
        env = {k: v for k, v in os.environ.items() if k != "AGUI_STORE_DB"}
        proc = subprocess.Popen(
            [sys.executable, "-m", "agui_store", "delete", "--thread", "gone", "--db", str(db)],
            stdin=secondary, stdout=subprocess.PIPE, stderr=secondary, env=env,
        )
        os.close(secondary)
        os.write(main, reply.encode() + b"\n")
        said = b""
        with contextlib.suppress(OSError):  # the terminal closes with the process
            while chunk := os.read(main, 4096):
                said += chunk
        proc.wait(timeout=120)
        os.close(main)
        assert proc.stdout is not None
        proc.stdout.close()
        return proc.returncode, said.decode()

    code, said = answer("n")
    assert code == 1 and "Erase thread 'gone'? [y/N]" in said and "nothing was erased" in said
    assert _thread_ids(cli, db) == ["gone", "kept"]
    code, said = answer("y")
    assert code == 0
    assert _thread_ids(cli, db) == ["kept"]


def test_prune_asked_on_a_terminal_erases_what_it_said_not_a_thread_finished_while_it_asked(
    tmp_path: Path,
) -> None:
    """The cutoff is taken once, when the command asks: a thread that went idle (here,
    was written) between the question and the answer was not in what the person agreed
    to erase."""
    import pty

    import agui_store
    from tests.streams import run, say

    db = tmp_path / "s.db"
    _two_threads(db)
    main, secondary = pty.openpty()
    env = {k: v for k, v in os.environ.items() if k != "AGUI_STORE_DB"}
    proc = subprocess.Popen(
        [sys.executable, "-m", "agui_store", "prune", "--older-than", "0s", "--db", str(db)],
        stdin=secondary, stdout=subprocess.PIPE, stderr=secondary, env=env, text=True,
    )
    os.close(secondary)
    said = b""
    while b"[y/N]" not in said:
        chunk = os.read(main, 4096)
        assert chunk, said
        said += chunk
    assert said.decode().startswith("this erases 2 thread(s)")
    with agui_store.open(db) as store:  # written, and finished, while the question waits
        store.append(run("late", "l1", *say("m3", "written after the question")))
    os.write(main, b"y\n")
    out, _ = proc.communicate(timeout=120)
    with contextlib.suppress(OSError):
        while os.read(main, 4096):
            pass
    os.close(main)
    assert proc.returncode == 0 and out.startswith("erased 2 thread(s)"), out
    assert _thread_ids(cli, db) == ["late"]


@pytest.mark.parametrize("command", [["analyze", "-"], ["export", "--sqlite", "-"]])
def test_the_analysis_database_is_never_written_to_a_terminal(
    tmp_path: Path, command: list[str]
) -> None:
    import pty

    db = tmp_path / "s.db"
    cli("demo", db=db)
    main, secondary = pty.openpty()
    proc = subprocess.run(
        [sys.executable, "-m", "agui_store", *command, "--db", str(db)],
        stdout=secondary, stderr=subprocess.PIPE, text=True, timeout=120,
    )
    os.close(secondary)
    os.close(main)
    assert proc.returncode == 2
    assert proc.stderr.startswith(f"agui-store {command[0]}: the analysis database is binary")
    assert "Traceback" not in proc.stderr


def test_search_prints_a_hit_a_line_newest_first_and_names_the_next_page(tmp_path: Path) -> None:
    db = tmp_path / "s.db"
    cli("demo", db=db)
    thread = json.loads(cli("threads", "--json", db=db).stdout)[0]["threadId"]
    out = cli("search", "porto", db=db).stdout.splitlines()
    assert out[0] == f"{thread}  run-2  assistant  [Porto] is cooler: 17°C and cloudy."
    assert f"{thread}  run-2  user  And in [Porto]?" in out
    page = cli("search", "weather", "--limit", "1", db=db)
    assert page.stdout.count("\n") == 1
    assert "next page: agui-store search weather --limit 1 --cursor " in page.stderr
    found = json.loads(cli("search", "get_weather", "--thread", thread, "--json", db=db).stdout)
    hits = found["hits"]
    assert found["nextCursor"] is None  # the last page
    assert {h["toolName"] for h in hits} == {"get_weather"}
    assert all(h["snippet"].startswith("[get]_[weather]") for h in hits)
    assert cli("search", "porto", "--owner", "someone", db=db).stdout == ""


def test_search_takes_words_given_apart_as_one_query_and_a_word_to_leave_out_after_dashes(
    tmp_path: Path,
) -> None:
    db = tmp_path / "s.db"
    cli("demo", db=db)
    together = cli("search", "porto cooler", db=db).stdout
    assert together and together.count("\n") == 1
    assert cli("search", "porto", "cooler", db=db).stdout == together
    # Options before the --: every word after it is the query's.
    left_out = cli("search", "--db", str(db), "porto", "--", "-cooler").stdout
    assert left_out == cli("search", "porto -cooler", db=db).stdout
    assert left_out and "cooler" not in left_out.lower()
    page = cli("search", "--db", str(db), "--limit", "1", "porto", "--", "-cooler")
    assert "next page: agui-store search 'porto -cooler' --limit 1 --cursor " in page.stderr
    proc = cli("search", "porto", "-cooler", db=db, ok=False)
    assert proc.returncode == 2 and proc.stdout == ""
    assert proc.stderr == (
        "agui-store search: unrecognized arguments: -cooler (a -word to leave out goes after "
        "--: agui-store search porto -- -hotel)\n"
    )


def test_search_json_carries_the_cursor_that_continues_past_its_page(tmp_path: Path) -> None:
    db = tmp_path / "s.db"
    cli("demo", db=db)
    every = json.loads(cli("search", "porto", "--limit", "1000", "--json", db=db).stdout)
    assert every["nextCursor"] is None and len(every["hits"]) >= 3
    pages, cursor = [], []
    while True:
        page = json.loads(cli("search", "porto", "--limit", "2", *cursor, "--json",
                              db=db).stdout)
        pages += page["hits"]
        if page["nextCursor"] is None:
            break
        assert page["nextCursor"] == page["hits"][-1]["cursor"]
        cursor = ["--cursor", page["nextCursor"]]
    assert pages == every["hits"]


def test_the_next_page_command_of_a_search_works_pasted_whatever_begins_with_a_dash(
    tmp_path: Path,
) -> None:
    import agui_store

    db = tmp_path / "s.db"
    with agui_store.open(db) as store:
        for i in range(3):
            store.append([{"type": "RUN_STARTED", "threadId": "-t", "runId": f"r{i}"},
                          {"type": "TEXT_MESSAGE_START", "messageId": f"m{i}", "role": "user"},
                          {"type": "TEXT_MESSAGE_CONTENT", "messageId": f"m{i}",
                           "delta": f"porto {i}"},
                          {"type": "TEXT_MESSAGE_END", "messageId": f"m{i}"},
                          {"type": "RUN_FINISHED", "threadId": "-t", "runId": f"r{i}"}],
                         scope="-al")
    first = cli("search", "--db", str(db), "--limit", "1", "--thread=-t", "--owner=-al",
                "--", "-hotel", "porto")
    [more] = [line for line in first.stderr.splitlines() if line.startswith("next page: ")]
    pasted = shlex.split(more.removeprefix("next page: "))
    assert pasted[:2] == ["agui-store", "search"]
    second = cli(*pasted[1:])
    assert second.stdout.startswith("-t  r1  user  [porto] 1")


def test_a_next_page_command_printed_where_the_encoding_lacks_its_words_works_pasted(
    tmp_path: Path,
) -> None:
    """Where stderr's encoding cannot hold a word of the command (``PYTHONIOENCODING=ascii``),
    the word is written in ANSI-C quotes, whose escapes bash reads back as the word."""
    import agui_store

    db = tmp_path / "s.db"
    with agui_store.open(db) as store:
        for i in range(3):
            store.append([{"type": "RUN_STARTED", "threadId": "東京", "runId": f"r{i}"},
                          {"type": "TEXT_MESSAGE_START", "messageId": f"m{i}", "role": "user"},
                          {"type": "TEXT_MESSAGE_CONTENT", "messageId": f"m{i}",
                           "delta": f"東京 {i} 🏨"},
                          {"type": "TEXT_MESSAGE_END", "messageId": f"m{i}"},
                          {"type": "RUN_FINISHED", "threadId": "東京", "runId": f"r{i}"}])
    env = {k: v for k, v in os.environ.items() if k != "AGUI_STORE_DB"}
    env["PYTHONIOENCODING"] = "ascii"
    for argv, prefix in (
        (["search", "東京", "--thread", "東京", "--limit", "1"], "next page: "),
        (["log", "--thread", "東京", "--limit", "1"], "next page: "),
    ):
        first = subprocess.run([sys.executable, "-m", "agui_store", "--db", str(db), *argv],
                               capture_output=True, text=True, env=env, timeout=120)
        assert first.returncode == 0, first.stderr
        [line] = [line for line in first.stderr.splitlines() if line.startswith(prefix)]
        assert line.isascii(), line
        pasted = subprocess.run(
            ["bash", "-c", 'printf "%s\\0" ' + line.removeprefix(prefix)],
            capture_output=True, text=True, check=True,
        ).stdout.split("\0")[:-1]
        assert "東京" in pasted, pasted
        second = cli(*pasted[1:])
        assert second.stdout and second.stdout != cli(*argv, db=db).stdout, pasted


def test_a_next_page_command_gives_the_shell_back_a_thread_id_with_control_characters(
    tmp_path: Path,
) -> None:
    """The line shows the characters as escapes, in ANSI-C quotes that bash reads back."""
    import agui_store

    db, thread = tmp_path / "s.db", "t-\u202eevil\u202c\x1b[31m'\n"
    with agui_store.open(db) as store:
        for i in range(3):
            store.append([{"type": "RUN_STARTED", "threadId": thread, "runId": f"r{i}"},
                          {"type": "RUN_FINISHED", "threadId": thread, "runId": f"r{i}"}])
    first = cli("log", "--thread", thread, "--limit", "1", db=db)
    [line] = [line for line in first.stderr.splitlines() if line.startswith("next page: ")]
    assert "\x1b" not in line and "\u202e" not in line
    pasted = subprocess.run(
        ["bash", "-c", 'printf "%s\\0" ' + line.removeprefix("next page: ")],
        capture_output=True, text=True, check=True,
    ).stdout.split("\0")[:-1]
    assert pasted[:2] == ["agui-store", "--db"] and thread in pasted
    second = cli(*pasted[1:])
    assert second.stdout.startswith("r1 ")


def test_search_with_a_query_of_the_wrong_shape_exits_1_with_one_line(tmp_path: Path) -> None:
    db = tmp_path / "s.db"
    cli("demo", db=db)
    proc = cli("search", '"porto', db=db, ok=False)
    assert proc.returncode == 1
    assert proc.stderr == (
        "agui-store search: search query '\"porto': a quote is not closed; phrases are "
        'written "like this"\n'
    )
    assert cli("search", db=db, ok=False).returncode == 2


def test_a_failed_import_or_copy_into_a_new_path_leaves_no_store_behind(tmp_path: Path) -> None:
    source = tmp_path / "s.db"
    _two_threads(source)
    archive = tmp_path / "a.jsonl"
    cli("export", "--all", "-o", str(archive), db=source)
    cut = tmp_path / "cut.jsonl"
    cut.write_bytes(archive.read_bytes()[:300])
    new = tmp_path / "new.db"
    for args in (("import", str(tmp_path / "missing.jsonl")), ("import", str(cut))):
        assert cli(*args, db=new, ok=False).returncode == 1
        assert sorted(p.name for p in tmp_path.iterdir()) == ["a.jsonl", "cut.jsonl", "s.db"]
    refused = cli("copy", str(source), str(new), "--thread", "nosuch", ok=False)
    assert refused.returncode == 1 and "no thread 'nosuch'" in refused.stderr
    assert not new.exists()
    # A --db could be taken for either store: refused before either is opened.
    refused = cli("copy", str(source), str(new), db=tmp_path / "other.db", ok=False)
    assert refused.returncode == 2 and "--db names neither" in refused.stderr
    assert not new.exists() and not (tmp_path / "other.db").exists()
    cli("import", str(archive), db=new)
    assert _thread_ids(cli, new) == ["gone", "kept"]


@pytest.mark.parametrize(
    ("name", "content"),
    [("empty.jsonl", b""), ("blank.jsonl", b"\n\n"), ("pings.sse", b": ping\n\n")],
)
def test_an_import_of_a_file_holding_no_events_is_refused_and_leaves_no_store(
    tmp_path: Path, name: str, content: bytes
) -> None:
    recording = tmp_path / name
    recording.write_bytes(content)
    proc = cli("import", str(recording), db=tmp_path / "new.db", ok=False)
    assert proc.returncode == 1 and not proc.stdout
    assert proc.stderr == (
        f"agui-store import: {recording}: holds no AG-UI events; nothing was imported\n"
    )
    assert sorted(p.name for p in tmp_path.iterdir()) == [name]


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (("export", "--all", "--reconnect-stream"), "takes no --reconnect-stream"),
        (("export", "g1", "--thread", "gone", "--all"), "takes no REF"),
        (("export", "--all", "-o", "x.jsonl", "--sqlite", "y.db"), "takes no -o, --all"),
        (("export", "--replace"), "--replace goes with --sqlite"),
        (("export", "--format", "archive", "--thread", "gone"), "export --all"),
        (("log", "--all", "g1"), "takes no REF"),
        (("diff", "g1...g1", "--thread", "gone", "--two-dot"), "takes no --two-dot"),
    ],
)
def test_options_that_exclude_each_other_are_a_usage_error_not_one_ignored(
    tmp_path: Path, args: tuple[str, ...], says: str
) -> None:
    db = tmp_path / "s.db"
    _two_threads(db)
    proc = cli(*args, db=db, ok=False)
    assert proc.returncode == 2 and says in proc.stderr, proc.stderr
    assert not proc.stdout and sorted(p.name for p in tmp_path.iterdir()) == ["s.db"]


def test_an_import_option_an_archive_cannot_take_is_a_usage_error(tmp_path: Path) -> None:
    db = tmp_path / "s.db"
    _two_threads(db)
    archive = tmp_path / "a.jsonl"
    cli("export", "--all", "-o", str(archive), db=db)
    proc = cli("import", str(archive), "--thread", "t", db=db, ok=False)
    assert proc.returncode == 2 and "do not apply to it" in proc.stderr


def on_disk(db: Path) -> bytes:
    """A store file and its WAL, if it has one (the last connection to close removes it)."""
    wal = Path(f"{db}-wal")
    return db.read_bytes() + (wal.read_bytes() if wal.exists() else b"")


@contextlib.contextmanager
def a_reader_on_its_snapshot(db: Path) -> Iterator[None]:
    """Another connection reading the store, on the snapshot it took: the pages it holds
    keep a purge from finishing until it ends."""
    import apsw

    reader = apsw.Connection(str(db))
    reader.execute("BEGIN")
    reader.execute("SELECT count(*) FROM event_log").fetchall()  # holds this snapshot
    try:
        yield
    finally:
        reader.execute("COMMIT")
        reader.close()


def test_a_json_receipt_whose_purge_did_not_finish_says_why(tmp_path: Path) -> None:
    db = tmp_path / "s.db"
    _two_threads(db)
    with a_reader_on_its_snapshot(db):
        receipt = json.loads(cli("delete", "--thread", "gone", "--yes", "--json",
                                 "--busy-timeout", "50", db=db).stdout)
    assert receipt["threads"] == 1 and not receipt["purged"]
    assert "agui-store purge" in receipt["purgePending"], receipt


def test_purge_finishes_a_purge_an_erasure_left_unfinished(tmp_path: Path) -> None:
    import agui_store

    db = tmp_path / "s.db"
    _two_threads(db)
    with agui_store.open(db, busy_timeout_ms=50) as store:
        with a_reader_on_its_snapshot(db):
            receipt = store.delete_thread("gone")
        assert not receipt.purged and "purge()" in receipt.purge_pending
        assert b"forget me" in on_disk(db)  # in the file or the WAL until a purge finishes
        done = json.loads(cli("purge", "--json", db=db).stdout)
        assert done == {"purged": True, "purgePending": ""}
        assert b"forget me" not in on_disk(db)
        assert store.threads() == ["kept"]
    assert cli("purge", db=db).stdout == "purged\n"
    assert cli("purge", "--rewrite", db=db).stdout == "purged\n"  # as every SQLite purge
