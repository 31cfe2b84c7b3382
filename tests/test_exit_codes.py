"""The command line never prints a traceback: one line saying what and where, and the exit
codes the README documents.

    0    success
    1    a store error (bad input, a missing run, a damaged, foreign or full file...), or a
         command's negative answer (``check`` found problems, ``validate-artifact``: invalid)
    2    usage: an unknown command or option, a missing or malformed argument
    3    an internal error (a bug): one line, and where to report it
    130  interrupted (Ctrl-C)

Every case drives the real entry point, ``python -m agui_store``, in its own process, with
real files: bad revisions, bad paths, damaged files, a full disk, an injected bug, SIGINT.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import apsw
import pytest

import agui_store
from agui_store import cli
from tests.workers.harness import ROOT, worker_env

ENTRY = [sys.executable, "-m", "agui_store"]


def agui(*args: str | bytes, prelude: str | None = None, stdin: str | None = None) -> (
    subprocess.CompletedProcess[str]
):
    """``python -m agui_store ARGS`` (``prelude``: Python run first in the same process)."""
    argv: list[str | bytes]
    if prelude is None:
        argv = [*ENTRY, *args]
    else:
        code = f"{prelude}\nimport runpy, sys\nsys.argv = ['agui-store', *sys.argv[1:]]\n" \
               "runpy.run_module('agui_store', run_name='__main__')\n"
        argv = [sys.executable, "-c", code, *args]
    return subprocess.run(argv, capture_output=True, text=True, timeout=120, cwd=ROOT,
                          env=worker_env(), input=stdin, errors="backslashreplace")


def assert_fails(result: subprocess.CompletedProcess[str], code: int, command: str,
                 *words: str) -> str:
    """Exit ``code``, one line on stderr naming the command and ``words``; no traceback."""
    assert result.returncode == code, (result.returncode, result.stderr)
    assert "Traceback" not in result.stderr and "Traceback" not in result.stdout
    lines = result.stderr.splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith(f"agui-store {command}: "), lines[0]
    for word in words:
        assert word in lines[0], (word, lines[0])
    return lines[0]


def one_run(run_id: str, thread: str = "t1") -> list[dict[str, str]]:
    return [{"type": "RUN_STARTED", "threadId": thread, "runId": run_id},
            {"type": "RUN_FINISHED", "threadId": thread, "runId": run_id}]


@pytest.fixture
def db(tmp_path: Path) -> str:
    path = tmp_path / "store.db"
    with agui_store.open(path) as store:
        store.append(one_run("r1"))
        store.append(one_run("r2"))
    return str(path)


def test_the_exit_codes_are_the_documented_table() -> None:
    assert (cli.EXIT_OK, cli.EXIT_STORE_ERROR, cli.EXIT_USAGE, cli.EXIT_INTERNAL,
            cli.EXIT_INTERRUPTED) == (0, 1, 2, 3, 130)


def test_success_is_0(db: str) -> None:
    done = agui("--db", db, "runs")
    runs = [line.split()[0] for line in done.stdout.splitlines()]
    assert (done.returncode, runs, done.stderr) == (0, ["r1", "r2"], "")


@pytest.mark.parametrize(
    ("args", "words"),
    [
        (["show", "HEAD~" + "9" * 5000], ["no ancestor that far back", "characters)"]),
        (["show", "HEAD~99999999999999999999"], ["no ancestor that far back"]),
        (["log", "\U0010ffff"], ["no run"]),
        (["show", "r\U0010ffff~2"], ["no run"]),
        (["show", "nope", "--thread", "t1"], ["no run", "nope"]),
        (["show", "HEAD", "--thread", "\U0010ffff"], ["no thread"]),
        (["runs", "--thread", "nope"], ["no thread 'nope'"]),
        (["diff", "r1", "missing"], ["missing"]),
        (["branch", "bad name", "r1", "--thread", "t1"], ["invalid branch name"]),
        (["branch", "x", "--delete", "--thread", "t1"], ["no branch 'x'"]),
        (["fork", "HEAD~5"], ["no ancestor"]),
    ],
)
def test_bad_revisions_and_names_are_exit_1_in_one_line(
    db: str, args: list[str], words: list[str]
) -> None:
    assert_fails(agui("--db", db, *args), 1, args[0], *words)


@pytest.mark.parametrize(("args", "named"), [
    ([b"show", b"r\xff\xfe"], "argument REF: $'r\\xff\\xfe' is not valid UTF-8 text"),
    ([b"log", b"main..\xff"], "argument REF: $'main..\\xff' is not valid UTF-8 text"),
    ([b"diff", b"r1", b"it's\xff"], "argument B: $'it\\'s\\xff' is not valid UTF-8 text"),
    ([b"branch", b"x\xff"], "argument NAME: $'x\\xff' is not valid UTF-8 text"),
    ([b"runs", b"--thread", b"\xff"], "argument --thread: $'\\xff' is not valid UTF-8 text"),
])
def test_a_word_that_is_not_utf8_on_the_command_line_is_named_as_the_bytes_typed(
    db: str, args: list[bytes], named: str
) -> None:
    """Linux passes argv as bytes: invalid UTF-8 becomes lone surrogates in Python, which a
    user never typed; the error names the bytes as the shell takes them back."""
    before = Path(db).read_bytes()
    line = assert_fails(agui(b"--db", db.encode(), *args), 2, args[0].decode(), named)
    assert "surrogate" not in line and "udc" not in line, line
    assert Path(db).read_bytes() == before


def test_a_store_path_that_is_not_utf8_is_refused_by_name_and_leaves_no_file(
    tmp_path: Path,
) -> None:
    done = agui(b"--db", os.fsencode(tmp_path) + b"/b\xfe.db", b"demo")
    assert_fails(done, 1, "demo", "b\\udcfe.db' is not UTF-8")
    assert os.listdir(tmp_path) == []


def _folder(tmp_path: Path) -> Path:
    path = tmp_path / "x.db"
    path.mkdir()
    return path


def _in_a_missing_folder(tmp_path: Path) -> Path:
    return tmp_path / "missing" / "x.db"


def _text_file(tmp_path: Path) -> Path:
    path = tmp_path / "x.db"
    path.write_text("not a database\n", encoding="utf-8")
    return path


@pytest.mark.parametrize(
    ("make", "words"),
    [
        (_folder, ["is a folder"]),
        (_in_a_missing_folder, ["does not exist"]),
        (_text_file, ["not an agui-store file", "untouched"]),
    ],
    ids=["a folder", "a missing folder", "a text file"],
)
def test_bad_store_paths_are_exit_1_in_one_line(
    tmp_path: Path, make: Callable[[Path], Path], words: list[str]
) -> None:
    path = make(tmp_path)
    assert_fails(agui("--db", str(path), "threads"), 1, "threads", str(path.parent), *words)


@pytest.mark.parametrize(
    ("args", "words"),
    [
        (["import", "{missing}"], ["No such file", "missing.jsonl"]),
        (["import", "{folder}"], ["Is a directory"]),
        (["import", "{garbage}"], ["malformed JSON"]),
        (["export", "r1", "-o", "{nowhere}"], ["out.jsonl", "does not exist"]),
        (["export", "r1", "-o", "{db}"], ["the store's own file"]),
        (["validate-artifact", "{missing}"], ["missing.jsonl"]),
        (["import", "{db}"], ["the store's own file", "not a recording"]),
        (["import", "{db}-wal"], ["the store's own wal file"]),
    ],
)
def test_bad_files_given_to_commands_are_exit_1_in_one_line(
    db: str, tmp_path: Path, args: list[str], words: list[str]
) -> None:
    (tmp_path / "garbage.jsonl").write_bytes(b'{"type": "RUN_STARTED", "threadId": \xff')
    (tmp_path / "folder").mkdir()
    names = {"missing": str(tmp_path / "missing.jsonl"), "folder": str(tmp_path / "folder"),
             "garbage": str(tmp_path / "garbage.jsonl"), "db": db,
             "nowhere": str(tmp_path / "no" / "such" / "folder" / "out.jsonl")}
    argv = [a.format(**names) for a in args]
    before = Path(db).read_bytes()
    assert_fails(agui("--db", db, *argv), 1, args[0], *words)
    assert Path(db).read_bytes() == before


def test_an_import_file_nested_too_deep_to_decode_is_exit_1_naming_the_file(
    db: str, tmp_path: Path
) -> None:
    # Its first line is read to tell an archive from events: nested that deep, it is neither.
    deep = tmp_path / "deep.json"
    deep.write_text("[" * 100_000)
    before = Path(db).read_bytes()
    assert_fails(agui("--db", db, "import", str(deep)), 1, "import", str(deep), "event 0")
    assert Path(db).read_bytes() == before


@pytest.mark.parametrize("command", ["import", "validate-artifact"])
def test_an_empty_file_argument_is_a_usage_error_naming_it(tmp_path: Path, command: str) -> None:
    # An unset shell variable ("$FILE"): said as what it is, not as the folder '.' or a
    # nameless missing file, and no store is created for it.
    db = tmp_path / "new.db"
    assert_fails(agui("--db", str(db), command, ""), 2, command, "argument FILE",
                 "not an empty string")
    assert not db.exists()


@pytest.mark.skipif(not Path("/dev/full").exists(), reason="needs /dev/full")
@pytest.mark.parametrize("args", [["slim"], ["threads", "--json"], ["export", "r2"]])
def test_a_full_stdout_is_exit_1_naming_stdout(db: str, args: list[str]) -> None:
    with open("/dev/full", "w") as full:
        done = subprocess.run([*ENTRY, "--db", db, *args], stdout=full, stderr=subprocess.PIPE,
                              text=True, timeout=120, cwd=ROOT, env=worker_env())
    done.stdout = ""  # it went to /dev/full
    assert_fails(done, 1, args[0], "cannot write to stdout", "No space left on device")


@pytest.mark.skipif(not Path("/dev/full").exists(), reason="needs /dev/full")
@pytest.mark.parametrize(("args", "command"), [
    (["--help"], ""), (["log", "-h"], " log"), (["help", "show"], " show"), (["--version"], ""),
])
def test_help_that_a_full_stdout_cannot_take_is_exit_1_naming_stdout(
    args: list[str], command: str
) -> None:
    # As git log -h > /dev/full fails: exit 0 would say the help was written.
    with open("/dev/full", "w") as full:
        done = subprocess.run([*ENTRY, *args], stdout=full, stderr=subprocess.PIPE, text=True,
                              timeout=120, cwd=ROOT, env=worker_env())
    assert done.returncode == 1, done.stderr
    assert done.stderr.splitlines() == [
        f"agui-store{command}: cannot write to stdout: No space left on device"
    ]


def test_help_into_a_closed_pipe_is_exit_0_in_silence() -> None:
    # agui-store --help | head -1: the reader went away, which is no error.
    reader, writer = os.pipe()
    os.close(reader)
    try:
        done = subprocess.run([*ENTRY, "--help"], stdout=writer, stderr=subprocess.PIPE,
                              text=True, timeout=120, cwd=ROOT, env=worker_env())
    finally:
        os.close(writer)
    assert (done.returncode, done.stderr) == (0, "")


def test_a_damaged_file_is_exit_1_and_check_lists_its_problems(db: str) -> None:
    conn = apsw.Connection(db)
    conn.execute("UPDATE blobs SET data = x'789c0badc0ffee', codec = 1")
    conn.close()
    assert_fails(agui("--db", db, "show", "r2"), 1, "show", db, "damaged", "agui-store check")
    checked = agui("--db", db, "check")
    assert checked.returncode == 1
    assert "problem" in checked.stdout and "Traceback" not in checked.stderr


def test_a_corrupt_page_is_exit_1_naming_the_file(tmp_path: Path) -> None:
    path = tmp_path / "corrupt.db"
    with agui_store.open(path) as store:
        for i in range(150):
            store.append(one_run(f"run-{i:03d}"))
    conn = apsw.Connection(str(path), flags=apsw.SQLITE_OPEN_READONLY)
    pages = [r[0] for r in conn.execute(
        "SELECT pageno FROM dbstat WHERE name = 'event_log' AND pagetype = 'leaf' ORDER BY pageno")]
    conn.close()
    with open(path, "r+b") as fh:
        fh.seek((pages[len(pages) // 2] - 1) * 4096)
        fh.write(b"\xa5" * 4096)
    assert_fails(agui("--db", str(path), "export", "--all", "--thread", "t1"), 1, "export",
                 str(path), "corrupt page")
    checked = agui("--db", str(path), "check")
    assert checked.returncode == 1 and "Traceback" not in checked.stderr


def test_check_json_on_a_store_it_cannot_read_still_prints_one_failed_report(
    tmp_path: Path,
) -> None:
    path = tmp_path / "cut.db"
    with agui_store.open(path) as store:
        for i in range(150):
            store.append(one_run(f"run-{i:03d}"))
    with open(path, "r+b") as fh:
        fh.truncate(path.stat().st_size // 2)
    for where in (path, tmp_path / "missing.db"):
        done = agui("--db", str(where), "--json", "check")
        assert done.returncode == 1 and "Traceback" not in done.stderr
        report = json.loads(done.stdout)
        assert report["ok"] is False and report["checked"] == []
        [problem] = report["problems"]
        assert problem["check"] == "open" and problem["detail"] in done.stderr


def test_a_full_disk_is_exit_1_naming_the_file(tmp_path: Path) -> None:
    recording = tmp_path / "big.jsonl"
    text = "lorem ipsum dolor sit amet " * 2000
    with open(recording, "w", encoding="utf-8") as fh:
        for i in range(40):
            started, finished = one_run(f"run-{i}")
            for event in [
                started,
                {"type": "TEXT_MESSAGE_START", "messageId": f"m{i}", "role": "assistant"},
                {"type": "TEXT_MESSAGE_CONTENT", "messageId": f"m{i}", "delta": text},
                {"type": "TEXT_MESSAGE_END", "messageId": f"m{i}"},
                finished,
            ]:
                fh.write(json.dumps(event) + "\n")
    path = tmp_path / "full.db"
    limit = ("import resource, signal\nsignal.signal(signal.SIGXFSZ, signal.SIG_IGN)\n"
             "resource.setrlimit(resource.RLIMIT_FSIZE, (512 * 1024, resource.RLIM_INFINITY))")
    done = agui("--db", str(path), "import", str(recording), prelude=limit)
    assert_fails(done, 1, "import", str(path), "no space left", "free space and retry")
    with agui_store.open(path) as store:  # what was imported before the limit is whole
        assert store.check().ok


@pytest.mark.parametrize(
    "args",
    [["frobnicate"], ["show", "--no-such-option"], ["log", "--limit", "0"], ["log", "--cursor", ""],
     ["slim", "HEAD", "--last", "x"],
     ["export", "--format", "xml"]],
)
def test_usage_errors_are_exit_2_without_a_traceback(db: str, args: list[str]) -> None:
    done = agui("--db", db, *args)
    assert done.returncode == 2, done.stderr
    assert "Traceback" not in done.stderr
    assert "usage:" in done.stderr


def test_an_internal_error_is_exit_3_in_one_line_saying_where_to_report(db: str) -> None:
    bug = ("import agui_store.store\n"
           "def broken(self, thread_id):\n"
           "    return {}['missing key']\n"
           "agui_store.store.Store.runs = broken\n")
    done = agui("--db", db, "runs", "--thread", "t1", prelude=bug)
    line = assert_fails(done, 3, "runs", "internal error", "KeyError", "report")
    assert "AGUI_STORE_DEBUG" in line


def test_an_internal_error_inside_a_transaction_is_exit_3_and_names_the_file(db: str) -> None:
    # A query fails inside the read transaction that show runs: apsw's connection hooks give
    # every connection the store opens a statement tracer that raises on its first SELECT.
    bug = ("import apsw\n"
           "def trace(cursor, sql, bindings):\n"
           "    if sql.lstrip().startswith('SELECT'):\n"
           "        raise ZeroDivisionError('a query failed')\n"
           "    return True\n"
           "apsw.connection_hooks.append(lambda conn: setattr(conn, 'exec_trace', trace))\n")
    done = agui("--db", db, "show", "r1", prelude=bug)
    assert_fails(done, 3, "show", "internal error", "ZeroDivisionError", db)


def test_the_debug_variable_adds_the_traceback_after_the_line(db: str) -> None:
    bug = ("import os, agui_store.store\nos.environ['AGUI_STORE_DEBUG'] = '1'\n"
           "agui_store.store.Store.runs = lambda self, t: [][1]\n")
    done = agui("--db", db, "runs", "--thread", "t1", prelude=bug)
    assert done.returncode == 3
    assert done.stderr.startswith("agui-store runs: internal error")
    assert "Traceback" in done.stderr


def _default_sigint() -> None:
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def test_ctrl_c_is_exit_130_in_one_line(tmp_path: Path) -> None:
    recording = tmp_path / "long.jsonl"
    with open(recording, "w", encoding="utf-8") as fh:
        for i in range(20_000):
            for event in one_run(f"run-{i}", thread=f"t{i}"):
                fh.write(json.dumps(event) + "\n")
    path = tmp_path / "interrupted.db"
    # A shell without job control starts background commands with SIGINT ignored, and a
    # child inherits that (Python then installs no KeyboardInterrupt): the CLI gets Ctrl-C's
    # default disposition back, as a terminal would give it, however pytest was started.
    proc = subprocess.Popen([*ENTRY, "--db", str(path), "import", str(recording)], cwd=ROOT,
                            env=worker_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, preexec_fn=_default_sigint)
    deadline = time.monotonic() + 60
    while not os.path.exists(f"{path}-wal") and time.monotonic() < deadline:
        time.sleep(0.02)  # the store is open and writing: main() is running
    time.sleep(0.2)
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, (proc.returncode, err)
    assert err.splitlines() == [
        "agui-store import: interrupted (the transaction under way was rolled back; what "
        "committed before it is kept, and 'agui-store check' says what waits to be derived)"
    ]
    with agui_store.open(path) as store:
        assert store.check().ok


def test_ctrl_c_while_the_commands_load_is_exit_130_in_one_line(db: str) -> None:
    # A real SIGINT, which the process sends itself the moment Python looks for the commands
    # module: the moment a slow start gives a user time to press Ctrl-C.
    prelude = (
        "import os, signal, sys\n"
        "signal.signal(signal.SIGINT, signal.default_int_handler)\n"
        "class Interrupt:\n"
        "    def find_spec(self, name, path=None, target=None):\n"
        "        if name == 'agui_store.cli.commands':\n"
        "            os.kill(os.getpid(), signal.SIGINT)\n"
        "sys.meta_path.insert(0, Interrupt())\n"
    )
    done = agui("--db", db, "threads", prelude=prelude)
    assert done.returncode == 130, done.stderr
    assert done.stderr.splitlines() == ["agui-store: interrupted"]
    assert done.stdout == ""


def test_ctrl_c_in_a_command_that_only_reads_says_interrupted_alone(db: str) -> None:
    # A real SIGINT while the command reads, which has no transaction to speak of.
    prelude = (
        "import os, signal, agui_store.store\n"
        "signal.signal(signal.SIGINT, signal.default_int_handler)\n"
        "agui_store.store.Store.runs = lambda self, *a, **k: os.kill(os.getpid(), "
        "signal.SIGINT)\n"
    )
    done = agui("--db", db, "runs", "--thread", "t1", prelude=prelude)
    assert done.returncode == 130, done.stderr
    assert done.stderr.splitlines() == ["agui-store runs: interrupted"]


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGHUP], ids=["term", "hup"])
def test_kill_ends_an_export_as_ctrl_c_does_leaving_no_partial_file(
    db: str, tmp_path: Path, signum: signal.Signals
) -> None:
    # The analysis database is built in TMPDIR, then copied into the FIFO, whose open waits
    # for a reader that never comes: the signal finds the command there, or building. The
    # wait is for the database's own file: Python's first look at TMPDIR makes and removes
    # a probe file of its own, which a signal landing within those microseconds leaves.
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    proc = subprocess.Popen([*ENTRY, "--db", db, "analyze", str(fifo)], cwd=ROOT,
                            env={**worker_env(), "TMPDIR": str(scratch)},
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and not any(
        name.startswith(".agui-store-analysis.db.") for name in os.listdir(scratch)
    ):
        time.sleep(0.02)  # the export has begun
    proc.send_signal(signum)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 128 + signum, (proc.returncode, err)
    assert err.splitlines() == [f"agui-store analyze: terminated ({signum.name})"]
    assert os.listdir(scratch) == []


def test_an_analysis_export_onto_a_full_disk_is_exit_1_and_leaves_nothing(
    tmp_path: Path,
) -> None:
    path = tmp_path / "store.db"
    with agui_store.open(path) as store:
        for i in range(30):
            started, finished = one_run(f"run-{i}")
            store.append([
                started,
                {"type": "TEXT_MESSAGE_START", "messageId": f"m{i}", "role": "user"},
                {"type": "TEXT_MESSAGE_CONTENT", "messageId": f"m{i}", "delta": "word " * 4000},
                {"type": "TEXT_MESSAGE_END", "messageId": f"m{i}"},
                finished,
            ])
    out = tmp_path / "out"
    out.mkdir()
    limit = ("import resource, signal\nsignal.signal(signal.SIGXFSZ, signal.SIG_IGN)\n"
             "resource.setrlimit(resource.RLIMIT_FSIZE, (256 * 1024, resource.RLIM_INFINITY))")
    done = agui("--db", str(path), "analyze", str(out / "analysis.db"), prelude=limit)
    assert_fails(done, 1, "analyze", str(out / "analysis.db"), "cannot write")
    assert list(out.iterdir()) == []


@pytest.mark.parametrize("args", [["export", "big", "--thread", "t1"], ["analyze", "-"]])
def test_a_reader_that_goes_away_is_exit_0_and_silent(db: str, args: list[str]) -> None:
    # `agui-store ... | head`: the pipe closes before the command has written it all.
    words = "a long reply " * 20_000  # more than a pipe's buffer holds
    with agui_store.open(db) as store:
        store.append([one_run("big")[0],
                      {"type": "TEXT_MESSAGE_START", "messageId": "m1", "role": "assistant"},
                      {"type": "TEXT_MESSAGE_CONTENT", "messageId": "m1", "delta": words},
                      {"type": "TEXT_MESSAGE_END", "messageId": "m1"}, one_run("big")[1]])
    child = subprocess.Popen([*ENTRY, "--db", db, *args], stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, cwd=ROOT, env=worker_env())
    assert child.stdout is not None and child.stderr is not None
    child.stdout.read(10)
    child.stdout.close()
    with child.stderr:
        stderr = child.stderr.read().decode()
    assert (child.wait(timeout=120), stderr) == (0, "")
    assert sorted(os.listdir(Path(db).parent)) == ["store.db"]


@pytest.mark.parametrize("args", [["log"], ["log", "--graph"], ["--json", "runs"]])
def test_a_stdout_the_shell_closed_is_exit_1_in_one_line(db: str, args: list[str]) -> None:
    # `agui-store log >&-`: Python starts without a stdout
    done = subprocess.run([*ENTRY, "--db", db, *args], stderr=subprocess.PIPE, text=True,
                          cwd=ROOT, env=worker_env(), timeout=120,
                          preexec_fn=lambda: os.close(1))
    done.stdout = ""  # none to read
    assert_fails(done, 1, args[-1] if args[0] == "--json" else args[0],
                 "cannot write to stdout")
