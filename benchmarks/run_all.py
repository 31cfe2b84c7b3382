"""Run the benchmarks and write the benchmarks page, ``docs/benchmarks.md``, whole.

    python -m benchmarks.run_all                       # every benchmark (long), then the page
    python -m benchmarks.run_all bench_log bench_diff  # these, then the page
    python -m benchmarks.run_all --quick bench_log     # small sizes: a smoke run, nothing kept
    python -m benchmarks.run_all --render              # the page from the results alone

Every ``bench_*.py`` in this folder has an entry in :data:`BENCHMARKS` (what it measures,
against which baseline, its goal and its command), and a test checks that none is missing.
A benchmark's latest output is kept in ``benchmarks/results/<name>.md``; the page shows one
section per benchmark with its latest figures, and says so plainly when a benchmark has none.
A benchmark that fails or cannot run (a missing optional dependency) keeps its previous
figures, and the script names it and exits 1: nothing is dropped silently.

The figures are same-run ratios: each next to its baseline, measured in the same run.
Absolute times move with the machine; the ratios much less.
"""

from __future__ import annotations

import argparse
import datetime
import importlib.util
import os
import platform
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
RESULTS = HERE / "results"
PAGE = ROOT / "docs" / "benchmarks.md"


@dataclass(frozen=True)
class Benchmark:
    title: str
    what: str
    baseline: str
    args: tuple[str, ...] = ()  # the command that gives the published figures
    quick: tuple[str, ...] = ()  # small sizes, for --quick
    goal: str = ""
    needs: str = ""  # an importable module the benchmark needs beyond the test extra
    install: str = ""  # how to get it


BENCHMARKS: dict[str, Benchmark] = {
    "bench_append": Benchmark(
        "Append",
        "Events per second through `Store.append`, one 50-event run a batch, by default and "
        "with other derivation settings; the last table counts statements and WAL frames a "
        "commit, which load does not move.",
        "Raw apsw `executemany` of the same rows into a file with the same pragmas, one "
        "transaction a batch, the rows encoded before the clock starts.",
        ("--runs", "200"), ("--runs", "50", "--repeat", "1"),
        goal="at least 0.5 of raw by default",
    ),
    "bench_append_depth": Benchmark(
        "Append deep in a long chain",
        "The median append over the last 100 runs of a 10,000-run chain, with inputs that hold "
        "only the new message; the two stores are appended to in turns.",
        "The same appends at runs 400-499 of the same chain.",
        ("--runs", "10000"), ("--runs", "1000"),
        goal="at most 1.3x",
    ),
    "bench_append_pages": Benchmark(
        "Pages an append writes",
        "The WAL frames a steady append's commit writes, by table and index (`dbstat`). "
        "Counted, not timed.",
        "Raw apsw `executemany` of the same rows.",
        ("--runs", "200"), ("--runs", "50"),
    ),
    "bench_asgi": Benchmark(
        "ASGI Recorder",
        "A pydantic-ai app served by uvicorn behind `agui_store.asgi.Recorder`: total time and "
        "time to first byte; 200 pre-built events; 20 concurrent streams, events received "
        "against events stored.",
        "The same app served without the Recorder, in turns in the same run.",
        ("--repeat", "30"), ("--repeat", "5"),
        goal="at most 1.10x total; every event stored",
    ),
    "bench_async": Benchmark(
        "Recording in asyncio",
        "The event loop's p99 lag while 20 streams are recorded with `astore.record`, and the "
        "longest stall while one 4 MB `STATE_SNAPSHOT` is recorded.",
        "The same app without recording, in the same run.",
        goal="at most 1.5x",
    ),
    "bench_check": Benchmark(
        "check()",
        "Time and peak memory of `check()` on two stores, one a multiple of the other, on "
        "SQLite (and PostgreSQL with `--postgres`).",
        "A raw read of the same log.",
        ("--runs", "100", "--scale", "4"), ("--runs", "20", "--scale", "2"),
    ),
    "bench_cli_log": Benchmark(
        "`agui-store log` with labels",
        "The CLI's `log` of two threads, each labelled run by run, at two thread lengths, one "
        "four times the other: runs of one question each, labelled with the question they "
        "added; and one question followed by runs that add only an answer (tool results sent "
        "back, regenerates), which take the question of the run before them.",
        "`log --json` of the same runs, which prints no labels.",
        ("--runs", "2000"), ("--runs", "200", "--repeat", "1"),
        goal="grows with the thread's length (4x the runs: about 4x the time), not its square",
    ),
    "bench_checkout": Benchmark(
        "Checkout down a chain",
        "Restoring the leaf of chains of 10 to 2,000 runs of 50 events: a full replay and a "
        "checkout from checkpoints; `check()` against one full replay.",
        "Reading and decoding the chain's events; decoding the result from one JSON document.",
        ("--depths", "10,100,1000,2000"), ("--depths", "10,100", "--repeat", "3"),
        goal="full replay at most 3x read+decode at 1,000 runs; checkout at least 20x faster "
        "than a full replay at 2,000 runs, and at most 3x decoding its result",
    ),
    "bench_compression": Benchmark(
        "Blob compression",
        "zlib against the alternatives on real message blobs: size, and decompression speed "
        "on checkout's hot path.",
        "Reading the plain bytes.",
    ),
    "bench_archive": Benchmark(
        "The archive",
        "A 10,000-run store (500 threads) exported whole with `export_archive` and imported "
        "into a new file with `import_archive`, each alone and together; tracemalloc's peak "
        "during each at a quarter of the store and at the whole.",
        "`copy` of the same store to a new file, in the same run (both destinations keep the "
        "log alone: derivation costs the same after either).",
        (), ("--runs", "400", "--repeat", "1"),
        goal="export + import at most 2x copy; memory flat as the store grows",
    ),
    "bench_copy": Benchmark(
        "Copy between stores",
        "`copy` of one 2,000-run thread from one file to a new one, the log only and with "
        "derivation (and to PostgreSQL with `--postgres`).",
        "The source's raw read: every event row of the thread in one query, nothing decoded.",
        quick=("--runs", "200"),
    ),
    "bench_diff": Benchmark(
        "Diff at the tip of a long chain",
        "`diff(tip~10, tip)` of a 10,000-run chain, cold (nothing left in memory), with its "
        "statement count.",
        "A cold checkout of the tip.",
        ("--runs", "10000"), ("--runs", "500", "--repeat", "3"),
        goal="at most 5 ms",
    ),
    "bench_errors": Benchmark(
        "Error translation",
        "An empty write and read transaction through the store's error-translating wrappers, "
        "and opening a file with its header check.",
        "The same `BEGIN` / `COMMIT` issued directly on apsw.",
    ),
    "bench_events_after": Benchmark(
        "A reconnecting reader's tail",
        "`events(run, after=cursor)` of a live run written one event per batch, read after a "
        "cursor at its end, its middle and its start, verified against the batch hashes.",
        "A raw `SELECT` of the same payloads after the same cursor, decoded with msgspec, "
        "unverified.",
        ("--sizes", "1000,10000"), ("--sizes", "200", "--repeat", "3"),
    ),
    "bench_file_size": Benchmark(
        "File size with full-history inputs",
        "A thread whose every run carries the client's whole history as its input "
        "(`HttpAgent`), stored by reference.",
        "The same thread stored without inputs.",
        ("--runs", "1000"), ("--runs", "200"),
        goal="at most 1.5x",
    ),
    "bench_http_agent": Benchmark(
        "HttpAgent appends",
        "`append(events, input=body)` with the whole history `HttpAgent` posts, over the last "
        "runs of a long thread; `--compare` adds a store that reads every body whole.",
        "Decoding the same body once, with the collector paused as the append runs, in turns "
        "in the same run.",
        ("--runs", "1000", "--compare"), ("--runs", "200"),
        goal="at most 2x",
    ),
    "bench_import": Benchmark(
        "Import",
        "Throughput and peak memory (`ru_maxrss`) of `agui-store import` of a generated JSON "
        "Lines recording, in a child process.",
        "Raw apsw in a child process: the same rows `executemany`-ed in one transaction, "
        "each line decoded once with msgspec for its type and ids, nothing validated.",
        ("--mb", "100"), ("--mb", "5"),
        goal="peak memory flat in the file's size (under 200 MB for 1 GB)",
    ),
    "bench_interleaved": Benchmark(
        "Interleaved runs of one thread",
        "20 runs of one thread appended one event a call, interleaved round-robin "
        "(`run_id=`), as a recorder of 20 concurrent streams writes them.",
        "The same runs streamed one after the other through the same code, and raw apsw "
        "one-event transactions.",
        goal="about 1x",
    ),
    "bench_langgraph": Benchmark(
        "Against LangGraph's SqliteSaver",
        "One 2,000-run conversation of 50-event runs stored by agui-store (with `HttpAgent` "
        "inputs, and events only) and by LangGraph's `SqliteSaver`: file size, checkout of the "
        "leaf, listing the history.",
        "LangGraph `SqliteSaver` (`put`, `get_tuple`, `list`) on the same conversation.",
        quick=("--runs", "200"),
        goal="file at least 150x smaller; checkout at most 1.0x `get_tuple`; history listed "
        "at least 10x faster",
        needs="langgraph.checkpoint.sqlite", install="pip install langgraph-checkpoint-sqlite",
    ),
    "bench_live_copies": Benchmark(
        "A live run streaming copies",
        "A live run streamed one `STATE_DELTA` per append, each a JSON Patch `copy` of a small "
        "value.",
        "The same run whose deltas `add` that value (no state needed to check them).",
        quick=("--sizes", "200"),
        goal="about 1x, flat with the run's length",
    ),
    "bench_log": Benchmark(
        "Log pages",
        "`log(limit=20)` at the tip and deep in a 10,000-run chain.",
        "The whole log of the same chain; `get_run` as the floor of a read call.",
        ("--runs", "10000"), ("--runs", "1000"),
        goal="at most 1 ms at the tip",
    ),
    "bench_search": Benchmark(
        "Search",
        "`search` for a rare word, a common word (`limit=20`) and a phrase in a 10,000-run "
        "store, and the common word in one thread and in the scope of an owner of two "
        "threads (on SQLite in wall and CPU time); `delete_thread` of a 10-run thread there; "
        "what the index costs an append; the index's size next to the text it indexes. "
        "SQLite and PostgreSQL.",
        "`log(limit=20)` at the tip of the same store; the same erasure in a store of a "
        "tenth the runs; the same appends without the index, each next to raw inserts of the "
        "same rows; the bytes of the indexed text.",
        ("--threads", "1000"), ("--threads", "50", "--append-runs", "20", "--repeat", "2"),
        goal="a rare word within 3x of `log`, a common one within 10x; the erasure within "
        "1.5x of the smaller store's; the append/raw ratio within 10 % of what it is without "
        "the index; the index at most 40 % of the text",
    ),
    "bench_long_message": Benchmark(
        "One long streamed message",
        "A run holding one message streamed as 10,000 to 160,000 deltas (text, chunks, tool "
        "arguments), appended as one batch; and the memory an append of a 4 MB and a 40 MB "
        "message of 4 kB deltas allocates at its peak.",
        "Raw apsw `executemany` of the same rows; a flat ratio across sizes means the append "
        "is linear. The memory against the message's own size.",
        ("--sizes", "10000,40000,160000"), ("--sizes", "2000,8000"),
    ),
    "bench_snippets": Benchmark(
        "Search snippets in long messages",
        "The snippet of a hit after a 0.25-4 MB word (a hex dump in a result that is not "
        "ASCII), after a run of Chinese characters as long, before megabytes of words, and "
        "of a phrase whose first word stands in every block of the text; and a search for "
        "a phrase at the end of a message of that size.",
        "The snippet of the same match at the end of a text as long made of ordinary words, "
        "in the same run; a ratio that does not grow with the size means no scan goes back "
        "over what it read. The phrase search against a search of its first word alone, on "
        "the same store.",
        ("--sizes", "250000,1000000,4000000"), ("--sizes", "100000,400000", "--repeat", "1"),
        goal="ratios that do not grow with the size",
    ),
    "bench_postgres": Benchmark(
        "PostgreSQL against SQLite",
        "A 200-run thread on PostgreSQL: append at the end, checkout and full replay of the "
        "leaf, log; where a steady append's time goes (statements, client CPU, server CPU, "
        "waiting).",
        "The same thread on an SQLite file in the same run, and a raw psycopg `COPY` of the "
        "same rows.",
        quick=("--runs", "50"),
    ),
    "bench_postgres_langgraph": Benchmark(
        "Against LangGraph's PostgresSaver",
        "The 2,000-run conversation of `bench_langgraph` on a throwaway PostgreSQL cluster: "
        "storage, append at run 2,000, checkout of the newest run, the whole log, and an "
        "append against raw `COPY` of its rows.",
        "LangGraph's `PostgresSaver` on the same conversation in the same run; raw psycopg "
        "`COPY`.",
        goal="storage 100x smaller, append 20x and checkout 10x faster, log 1,000x faster, "
        "append at least 50 % of `COPY`",
        needs="langgraph.checkpoint.postgres", install="pip install langgraph-checkpoint-postgres",
    ),
    "bench_postgres_pages": Benchmark(
        "PostgreSQL event pages",
        "The one-off migration of a schema version 2 store into event pages, and the `pages` "
        "check of `check()`.",
        "`COPY` of the same rows into a bare table; a raw read of them.",
        quick=("--runs", "100"),
    ),
    "bench_postgres_writers": Benchmark(
        "PostgreSQL writers on different threads",
        "8 writer processes on 8 threads of one store, with the shipped per-thread locks.",
        "The same workload under one writer lock, interleaved round by round.",
        ("--runs", "40", "--rounds", "5"), ("--runs", "5", "--rounds", "1"),
    ),
    "bench_readback_checks": Benchmark(
        "Read-back checks",
        "The nesting checks `append` runs on every batch, as a share of the append, for a "
        "realistic run and for deep-path patches.",
        "What every append already does with the batch (parse and validate).",
        ("--runs", "100"), ("--runs", "20"),
    ),
    "bench_rebuild": Benchmark(
        "Rebuilding derived data",
        "`Store.rebuild` of a thread of short turns (one user and one assistant message a run, "
        "the client's whole history sent as each run's input): its checkpoints, lineage "
        "digests and search rows dropped and derived again from the log, the log checked "
        "against its hashes first.",
        "Appending the same runs, which recorded the thread, in the same process.",
        ("--runs", "2000", "--repeat", "3"), ("--runs", "50", "--repeat", "1"),
        goal="at most 1.0x the appends that recorded the thread",
    ),
    "bench_conversations": Benchmark(
        "pydantic-ai conversations",
        "A pydantic-ai `ConversationStore` on the store: saving one turn at turn 2,000 and "
        "`load(limit=20)` of that conversation, on SQLite and PostgreSQL, and both next to "
        "pydantic-ai's `InMemoryConversationStore` holding the same conversation.",
        "The same save at turn 100, and `load()` of a 20-message conversation, in the same run.",
        ("--rounds", "30"), ("--turns", "300", "--rounds", "3", "--no-postgres"),
        goal="save at turn 2,000 within 1.3x of turn 100; load(limit=20) within 1.3x",
    ),
    "bench_erase": Benchmark(
        "Erasure",
        "`Store.delete_thread` of a 100-run thread from a store of 10,000 other runs, on "
        "SQLite and PostgreSQL: its transaction (up to the commit), and the whole call with "
        "the purge (SQLite: the file rewritten with `VACUUM`, then the WAL emptied; "
        "PostgreSQL: `VACUUM` of the tables it deleted from, index cleanup forced where the "
        "indexes hold erased keys).",
        "The same erasure from a store of 1,000 other runs, in the same run, the two stores "
        "erased from in turns.",
        ("--postgres",), ("--small", "100", "--large", "300", "--repeat", "2"),
        goal="the transaction within 1.5x of the 1,000-run store's; the purge reported "
        "beside it (on SQLite it rewrites the file, so it grows with the store)",
    ),
    "bench_short_turns": Benchmark(
        "Checkout of a short-turn conversation",
        "Checkout of the newest run of a thread of short turns (one user and one assistant "
        "message a run, the client's whole history sent as each run's input, as the ASGI "
        "Recorder stores it), at 2,000 and 10,000 runs, the store open, timed in turns with "
        "its baselines in one process; and the same checkout right after another connection "
        "wrote to the file, when it hashes every blob again; with `--postgres`, on "
        "PostgreSQL too.",
        "LangGraph `SqliteSaver.get_tuple` of the same messages on an open connection; "
        "msgspec decoding the answer from one JSON document (the floor). On PostgreSQL: one "
        "query for the answer from the thread and run ids (the run's record, its state and "
        "its message blobs, trusted as read) plus their decode, and "
        "`PostgresSaver.get_tuple`.",
        ("--runs", "2000,10000", "--postgres"), ("--runs", "200", "--repeat", "21"),
        goal="checkout at most 1.0x `get_tuple` at 2,000 runs, and at most 1.25x the decode "
        "of its answer at 10,000; on PostgreSQL at most 1.0x its floor and 1.0x "
        "`PostgresSaver.get_tuple`",
        needs="langgraph.checkpoint.sqlite",
        install="pip install langgraph-checkpoint-sqlite langgraph-checkpoint-postgres",
    ),
    "bench_sse": Benchmark(
        "A large SSE event read in small pieces",
        "One event of 1, 4 and 15 MiB fed to the SSE parser the recorders read responses with, "
        "in 64 KiB and in 4 KiB chunks, as a server sends it.",
        "The same event fed in one piece, in the same run.",
        quick=("--sizes", "1", "--repeat", "1"),
        goal="the chunked read a constant multiple of the whole one as the event grows",
    ),
    "bench_state_patch": Benchmark(
        "State patches",
        "`diff`'s state patch of two JSON documents: a long list that only grew, an object of "
        "2,000 keys with a tenth changed, and a list whose tail is reordered (no goal).",
        "`json.dumps` of both documents in the same run: reading every value once.",
        quick=("--repeat", "2"),
        goal="under 0.1x for a grown list; at most 1.5x for the changed object",
    ),
    "bench_ui": Benchmark(
        "Web viewer",
        "Each page of `agui-store ui` served in process (routing and templates included), "
        "cold: the tree's first screen of a 10,000-run thread, the run page of a "
        "4,000-message run, the diff page of two runs 10 apart at a chain's tip, the first "
        "page of the threads listing (50 of 60 threads, each with its first words); and the "
        "tree's first screen interactive in headless Chromium.",
        "The API call each page renders, in the same run: `log(limit=50)`, `checkout`, "
        "`diff`, and what `agui-store threads` reads for 50 rows (each thread's record, "
        "branches and a `checkout` of its newest run).",
        (), ("--runs", "500", "--messages", "400", "--threads", "12", "--repeat", "3",
             "--no-browser"),
        goal="tree <= 3x, run page <= 2x, diff page <= 2x, threads page <= 2x; "
        "interactive < 1 s",
    ),
    "bench_validate": Benchmark(
        "Validation and parsing",
        "`validate_event` of a decoded event, and `parse_events` of JSON lines and of dicts.",
        "`json.loads` of the same events.",
        quick=("--events", "1000", "--repeat", "3"),
    ),
    "bench_view": Benchmark(
        "The view's representation",
        "A long conversation's file size and a cold checkout of its newest run, at 2,000 and "
        "10,000 runs.",
        "LangGraph `SqliteSaver.get_tuple` on a new connection; the raw JSON of the events.",
        ("--runs", "2000,10000"), ("--runs", "200"),
        goal="checkout at most 1.0x `get_tuple`; bytes per run at 10,000 runs at most 1.1x "
        "those at 2,000; the file at most 2.5x the raw JSON of its events",
        needs="langgraph.checkpoint.sqlite", install="pip install langgraph-checkpoint-sqlite",
    ),
}


def discovered() -> list[str]:
    """Every benchmark script in this folder."""
    return sorted(p.stem for p in HERE.glob("bench_*.py"))


def command(name: str, quick: bool = False) -> list[str]:
    bench = BENCHMARKS[name]
    return ["python", "-m", f"benchmarks.{name}", *(bench.quick if quick else bench.args)]


def environment() -> str:
    load = ", ".join(f"{x:.1f}" for x in os.getloadavg())
    return (
        f"python {platform.python_version()}, {platform.machine()}, {os.cpu_count()} cores, "
        f"{platform.system()}, load average {load} at the start"
    )


def run(name: str, quick: bool) -> str | None:
    """Run one benchmark and keep its output; the reason it did not run, else ``None``."""
    bench = BENCHMARKS[name]
    if bench.needs and importlib.util.find_spec(bench.needs.split(".")[0]) is None:
        return f"needs `{bench.install}`"
    argv = command(name, quick)
    started = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    env = environment()
    print(f"$ {' '.join(argv)}", flush=True)
    proc = subprocess.run([sys.executable, *argv[1:]], capture_output=True, text=True, cwd=ROOT)
    print(proc.stdout, proc.stderr, sep="\n", flush=True)
    if proc.returncode != 0:
        return f"exit status {proc.returncode}: {proc.stderr.strip().splitlines()[-1:]}"
    if quick:  # a smoke run: its small sizes are not the published figures
        return None
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / f"{name}.md").write_text(
        f"Measured {started} with `{' '.join(argv)}` ({env}).\n\n"
        f"```text\n{proc.stdout.strip()}\n```\n",
        encoding="utf-8",
    )
    return None


def render() -> str:
    """The benchmarks page: one section per benchmark, in the order of :data:`BENCHMARKS`."""
    out = [
        "# Benchmarks",
        "",
        "<!-- Written by `python -m benchmarks.run_all`; edit benchmarks/run_all.py and",
        "     benchmarks/results/ instead. -->",
        "",
        "Plain scripts in `benchmarks/`, not collected by pytest. Each prints its environment and",
        "puts every figure next to a baseline measured in the same run: absolute times move with",
        "the machine, ratios much less. Run one with `python -m benchmarks.NAME`, or run some and",
        "rewrite this page with `python -m benchmarks.run_all NAME...`.",
        "",
        "| benchmark | goal |",
        "|---|---|",
    ]
    for name, bench in BENCHMARKS.items():
        out.append(f"| [{bench.title}](#{name}) | {bench.goal or '-'} |")
    out.append("")
    for name, bench in BENCHMARKS.items():
        out += [f"## {bench.title} {{ #{name} }}", "", f"`benchmarks/{name}.py`", ""]
        out += [f"**What it measures.** {bench.what}", ""]
        out += [f"**Baseline.** {bench.baseline}", ""]
        if bench.goal:
            out += [f"**Goal.** {bench.goal[0].upper()}{bench.goal[1:]}.", ""]
        out += ["**Command.**", "", "```sh", " ".join(command(name)), "```", ""]
        if bench.install:
            out += [f"It needs `{bench.install}`, only for that comparison.", ""]
        results = RESULTS / f"{name}.md"
        out += ["**Latest figures.**", ""]
        if results.exists():
            out += [results.read_text(encoding="utf-8").strip(), ""]
        else:
            out += [f"Not measured yet: run `python -m benchmarks.run_all {name}`.", ""]
    return "\n".join(out).rstrip() + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("names", nargs="*", metavar="NAME", help="bench_... (default: all)")
    parser.add_argument("--quick", action="store_true",
                        help="small sizes: a smoke run that keeps no figures")
    parser.add_argument("--render", action="store_true", help="only rewrite the page")
    args = parser.parse_args(argv)
    unknown = [n for n in args.names if n not in BENCHMARKS]
    missing = [n for n in discovered() if n not in BENCHMARKS]
    if unknown or missing:
        parser.error(f"unknown: {unknown}; not described in BENCHMARKS: {missing}")
    not_run = {}
    if not args.render:
        for name in args.names or list(BENCHMARKS):
            reason = run(name, args.quick)
            if reason:
                not_run[name] = reason
    if not args.quick:
        PAGE.write_text(render(), encoding="utf-8")
        print(f"wrote {PAGE.relative_to(ROOT)}")
    for name, reason in not_run.items():
        print(f"not run, previous figures kept: {name}: {reason}", file=sys.stderr)
    return 1 if not_run else 0


if __name__ == "__main__":
    sys.exit(main())
