"""langgraph: one conversation stored by agui-store and by LangGraph's ``SqliteSaver``.

A thread of 2,000 runs of 50 events each, appended run by run as a live server would: the
user's message (in the ``RunAgentInput`` the client sends), a tool call whose arguments stream
in small deltas with its result, and the assistant's reply streamed as 10-20 text deltas.
Messages are deterministic pseudo-random prose of a few hundred bytes each.

- agui-store, HttpAgent inputs: every run is appended with ``input=`` the full history plus the
  new user message, which is what ``HttpAgent`` sends (tools and all).
- agui-store, no inputs: the same conversation with the user's message streamed as events of
  the run instead (TEXT_MESSAGE_START role "user"), still 50 events per run.
- LangGraph: ``SqliteSaver.put`` of one checkpoint per run whose ``channel_values["messages"]``
  is the full message list at the end of the run (taken from agui-store's own
  ``checkout(run).messages``, so all three hold the same conversation, checked at the end),
  ``parent_config`` chaining each to the previous one: a LangGraph app that checkpoints once
  per run. Plain AG-UI message dicts, not LangChain message objects: the smallest and fastest
  form LangGraph can store them in, so the fairest baseline.

Both files get ``synchronous=NORMAL`` and are folded with ``PRAGMA wal_checkpoint(TRUNCATE)``
before they are measured (db + wal). "Listing the full history" is ``saver.list(config)``
read to the end (every checkpoint deserialized, as ``list()`` does, each dropped once seen)
against ``store.log(leaf)``: every run/checkpoint of the lineage, newest first.
``store.history(leaf)`` (every event, decoded) is shown beside it, and restoring the leaf
(``checkout`` against ``get_tuple``) as an extra row. Timings are medians, ratios same-run.

At 2,000 runs this takes minutes, not seconds (about 4 minutes of CPU, 10 on a busy 2-core
machine): SqliteSaver's file holds the conversation once per run (about 3 GB, and one listing
deserializes all of it), and every HttpAgent input carries the whole history, which append
parses and compares each time. ``--runs`` makes a quick smoke run; the goals are only judged
at 2,000 runs, the length they are stated for.

LangGraph is not a dependency of agui-store; install it for this benchmark only:

    pip install langgraph-checkpoint-sqlite
    python -m benchmarks.bench_langgraph [--runs 2000]
"""

from __future__ import annotations

import argparse
import os
import random
import shutil
import sqlite3
import statistics
import sys
import time
from importlib.metadata import version
from typing import Any

import apsw
import msgspec

import agui_store
from benchmarks._common import header, median_time, scratch_dir

try:
    from langgraph.checkpoint.base import create_checkpoint, empty_checkpoint
    from langgraph.checkpoint.sqlite import SqliteSaver
except ImportError:  # pragma: no cover - depends on the environment
    sys.exit(
        "bench_langgraph compares against LangGraph's SqliteSaver, which is not a dependency "
        "of agui-store. Install it for this benchmark only:\n"
        "    pip install langgraph-checkpoint-sqlite"
    )

EVENTS_PER_RUN = 50
#: The conversation length the goals are stated for.
GOAL_RUNS = 2000
THREAD = "thread-lg"
TOOL = {
    "name": "search_docs",
    "description": "Search the product documentation and return the most relevant passages.",
    "parameters": {
        "type": "object",
        "properties": {
            "query": {"type": "string", "description": "what to look for"},
            "max_results": {"type": "integer", "minimum": 1, "maximum": 20},
        },
        "required": ["query"],
    },
}

_VOCABULARY = (
    "the a an of to in for on with by from at as is are was were be been it this that these "
    "those which who what when where why how store thread run message event state checkpoint "
    "branch history client server agent tool call result query answer user assistant stream "
    "delta snapshot replay restore compact file table index page cache write read append "
    "latency memory disk network request response token model prompt context window summary "
    "report figure value number list order key hash blob lineage parent child version schema "
    "migration backup export import search result passage document section chapter example "
    "quickly slowly carefully exactly roughly almost always never often sometimes usually "
    "large small new old first last next previous same different simple complex fast slow "
    "safe careful useful important possible likely clear open closed ready done pending "
    "because although unless until while after before since so then also only just still "
    "configure install deploy measure compare explain describe check verify update delete "
    "build test ship review merge rebase fetch push pull start finish retry resume cancel"
)
_WORDS = _VOCABULARY.split()


def prose(rng: random.Random, n_chars: int) -> str:
    """Deterministic sentences of about ``n_chars`` characters."""
    out: list[str] = []
    size = 0
    while size < n_chars:
        words = [rng.choice(_WORDS) for _ in range(rng.randint(6, 16))]
        sentence = " ".join(words).capitalize() + rng.choice((".", ".", ".", "?", "!"))
        out.append(sentence)
        size += len(sentence) + 1
    return " ".join(out)


def split(rng: random.Random, text: str, n: int) -> list[str]:
    """``text`` cut into ``n`` non-empty pieces at random points (a streamed message)."""
    cuts = sorted(rng.sample(range(1, len(text)), n - 1))
    return [text[a:b] for a, b in zip([0, *cuts], [*cuts, len(text)])]


def conversation(n_runs: int, seed: int) -> list[dict[str, Any]]:
    """What each run says: the user's message, the tool call and result, the reply."""
    rng = random.Random(seed)
    turns = []
    for i in range(n_runs):
        query = prose(rng, rng.randint(40, 120)).rstrip(".?!")
        args = msgspec_json({"query": query, "max_results": rng.randint(3, 10)})
        text_deltas = rng.randint(10, 20)
        turns.append(
            {
                "run_id": f"run-{i:05d}",
                "user": prose(rng, rng.randint(120, 360)),
                "args": args,
                "result": prose(rng, rng.randint(200, 500)),
                "reply": prose(rng, rng.randint(250, 600)),
                "text_deltas": text_deltas,
                "rng_seed": rng.getrandbits(32),
            }
        )
    return turns


def msgspec_json(value: Any) -> str:
    return msgspec.json.encode(value).decode()


def user_message(turn: dict[str, Any]) -> dict[str, Any]:
    return {"id": f"u-{turn['run_id']}", "role": "user", "content": turn["user"]}


def run_events(turn: dict[str, Any], *, user_as_events: bool) -> list[dict[str, Any]]:
    """Exactly 50 events. With ``user_as_events`` the user's message is streamed in the run
    (3 events) and the tool arguments take 3 deltas fewer; the messages come out the same."""
    rng = random.Random(turn["rng_seed"])
    rid = turn["run_id"]
    call, tool_msg, reply = f"call-{rid}", f"t-{rid}", f"a-{rid}"
    k = turn["text_deltas"]
    n_args = EVENTS_PER_RUN - 7 - k - (3 if user_as_events else 0)
    events: list[dict[str, Any]] = [{"type": "RUN_STARTED", "threadId": THREAD, "runId": rid}]
    if user_as_events:
        uid = f"u-{rid}"
        events += [
            {"type": "TEXT_MESSAGE_START", "messageId": uid, "role": "user"},
            {"type": "TEXT_MESSAGE_CONTENT", "messageId": uid, "delta": turn["user"]},
            {"type": "TEXT_MESSAGE_END", "messageId": uid},
        ]
    events.append(
        {
            "type": "TOOL_CALL_START",
            "toolCallId": call,
            "toolCallName": TOOL["name"],
            "parentMessageId": f"a-{rid}-tool",
        }
    )
    events += [
        {"type": "TOOL_CALL_ARGS", "toolCallId": call, "delta": d}
        for d in split(rng, turn["args"], n_args)
    ]
    events.append({"type": "TOOL_CALL_END", "toolCallId": call})
    events.append(
        {
            "type": "TOOL_CALL_RESULT",
            "messageId": tool_msg,
            "toolCallId": call,
            "content": turn["result"],
            "role": "tool",
        }
    )
    events.append({"type": "TEXT_MESSAGE_START", "messageId": reply, "role": "assistant"})
    events += [
        {"type": "TEXT_MESSAGE_CONTENT", "messageId": reply, "delta": d}
        for d in split(rng, turn["reply"], k)
    ]
    events.append({"type": "TEXT_MESSAGE_END", "messageId": reply})
    events.append({"type": "RUN_FINISHED", "threadId": THREAD, "runId": rid})
    assert len(events) == EVENTS_PER_RUN
    return events


def http_agent_input(turn: dict[str, Any], history: list[dict[str, Any]]) -> dict[str, Any]:
    """The ``RunAgentInput`` ``HttpAgent`` posts: the whole history plus the new message."""
    return {
        "threadId": THREAD,
        "runId": turn["run_id"],
        "state": {},
        "messages": [*history, user_message(turn)],
        "tools": [TOOL],
        "context": [],
        "forwardedProps": {},
    }


class LangGraphThread:
    """A one-node graph's thread as ``SqliteSaver`` keeps it: one checkpoint per run."""

    def __init__(self, path: str) -> None:
        self.conn = sqlite3.connect(path, check_same_thread=False)
        self.saver = SqliteSaver(self.conn)
        self.saver.setup()
        self.conn.execute("PRAGMA synchronous=NORMAL")  # as agui-store's files
        self.config: dict[str, Any] = {"configurable": {"thread_id": THREAD, "checkpoint_ns": ""}}
        self.checkpoint = empty_checkpoint()
        self.step = 0

    def put_run(self, run_id: str, messages: list[dict[str, Any]]) -> None:
        cp, nv = self.checkpoint, self.saver.get_next_version
        versions = cp["channel_versions"]
        new_versions = {
            "__start__": nv(versions.get("__start__"), None),
            "messages": nv(versions.get("messages"), None),
            "branch:to:agent": nv(versions.get("branch:to:agent"), None),
        }
        cp["channel_versions"] = {**versions, **new_versions}
        cp["versions_seen"] = {
            "__input__": {},
            "__start__": {"__start__": new_versions["__start__"]},
            "agent": {"branch:to:agent": new_versions["branch:to:agent"]},
        }
        cp["channel_values"] = {"messages": messages}
        self.checkpoint = create_checkpoint(cp, None, self.step)
        metadata = {"source": "loop", "step": self.step, "parents": {}, "run_id": run_id}
        self.config = self.saver.put(self.config, self.checkpoint, metadata, new_versions)
        self.step += 1

    def close(self) -> None:
        self.conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        self.conn.close()


def median_time_within(fn: Any, *, repeat: int, budget_s: float) -> float:
    """Median of up to ``repeat`` timings, fewer once ``budget_s`` is spent (at least one):
    listing SqliteSaver's file takes tens of seconds at 2,000 runs."""
    times: list[float] = []
    while len(times) < repeat and sum(times) < budget_s:
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def file_size(path: str) -> tuple[int, int]:
    wal = path + "-wal"
    return os.path.getsize(path), os.path.getsize(wal) if os.path.exists(wal) else 0


def fold_wal(path: str) -> None:
    conn = apsw.Connection(path)
    conn.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchall()
    conn.close()


def table_sizes(path: str) -> list[tuple[str, int, int, int]]:
    """``(table or index, bytes on disk, payload bytes, pages)`` from SQLite's dbstat."""
    conn = apsw.Connection(path, flags=apsw.SQLITE_OPEN_READONLY)
    rows = conn.execute(
        "SELECT name, sum(pgsize), sum(payload), count(*) FROM dbstat "
        "GROUP BY name ORDER BY sum(pgsize) DESC"
    ).fetchall()
    conn.close()
    return [(str(n), int(s), int(p), int(c)) for n, s, p, c in rows]


def x(ratio: float) -> str:
    """A ratio with the digits that matter."""
    return f"{ratio:.2f}x" if ratio < 10 else f"{ratio:.0f}x"


def mb(n: float) -> str:
    return f"{n / 1e6:,.1f}" if n >= 1e5 else f"{n / 1e6:,.3f}"


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=2000)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--seed", type=int, default=20260)
    parser.add_argument(
        "--budget",
        type=float,
        default=60.0,
        help="seconds after which slow timings stop repeating (median of fewer)",
    )
    parser.add_argument(
        "--keep", action="store_true", help="keep the three files (several GB at 2,000 runs)"
    )
    args = parser.parse_args()
    header(f"langgraph: a {args.runs:,}-run conversation in agui-store and in SqliteSaver")
    print(
        f"langgraph-checkpoint {version('langgraph-checkpoint')} | langgraph-checkpoint-sqlite "
        f"{version('langgraph-checkpoint-sqlite')} | sqlite3 module's sqlite "
        f"{sqlite3.sqlite_version}"
    )
    print(
        f"{args.runs:,} runs x {EVENTS_PER_RUN} events: user message (input, or 3 events), "
        "a tool call (args in 20-33 deltas) and its result, a reply in 10-20 deltas; "
        "4 messages per run"
    )
    print("HttpAgent inputs: each run appended with input= the full history + the new message")
    print("no inputs: the user's message streamed as events of the run instead")
    print(
        "LangGraph: SqliteSaver.put of one checkpoint per run holding the full message list "
        "(plain dicts)"
    )
    print()

    tmp = scratch_dir("agui-bench-langgraph-")
    try:
        run(args, tmp)
    finally:
        if args.keep:
            print(f"files kept in {tmp}")
        else:
            shutil.rmtree(tmp, ignore_errors=True)


def run(args: argparse.Namespace, tmp: str) -> None:
    started = time.perf_counter()
    turns = conversation(args.runs, args.seed)
    p_in, p_ev, p_lg = (os.path.join(tmp, f) for f in ("inputs.db", "events.db", "langgraph.db"))

    # --- build: the same conversation three times, run by run --------------------------------
    t_in = t_ev = t_lg = 0.0
    lg = LangGraphThread(p_lg)
    with agui_store.open(p_in) as s_in, agui_store.open(p_ev) as s_ev:
        history: list[dict[str, Any]] = []
        for turn in turns:
            events = run_events(turn, user_as_events=False)
            run_input = http_agent_input(turn, history)
            t0 = time.perf_counter()
            s_in.append(events, input=run_input)
            t_in += time.perf_counter() - t0
            events = run_events(turn, user_as_events=True)
            t0 = time.perf_counter()
            s_ev.append(events)
            t_ev += time.perf_counter() - t0
            # The conversation as the client holds it after the run: what LangGraph stores,
            # and the history the client sends with the next run.
            history = s_in.checkout(turn["run_id"]).messages
            t0 = time.perf_counter()
            lg.put_run(turn["run_id"], history)
            t_lg += time.perf_counter() - t0
    lg.close()
    for path in (p_in, p_ev, p_lg):
        fold_wal(path)
    size = {p: file_size(p) for p in (p_in, p_ev, p_lg)}
    total = {p: sum(size[p]) for p in size}

    # --- read: fresh connections on the folded files ------------------------------------------
    leaf = turns[-1]["run_id"]
    config = {"configurable": {"thread_id": THREAD, "checkpoint_ns": ""}}
    lg_conn = sqlite3.connect(p_lg, check_same_thread=False)
    saver = SqliteSaver(lg_conn)
    listed: list[int] = []

    def lg_list_all() -> None:
        # Every checkpoint is read and deserialized, as list(saver.list(config)) does, but
        # each is dropped once seen: holding all of them (millions of dicts) would time the
        # garbage collector rather than SqliteSaver.
        listed.append(sum(1 for _ in saver.list(config)))

    with agui_store.open(p_in) as s_in, agui_store.open(p_ev) as s_ev:
        # Same conversation everywhere, same lineage length.
        latest = saver.get_tuple(config)
        assert latest is not None
        lg_messages = latest.checkpoint["channel_values"]["messages"]
        assert s_in.checkout(leaf).messages == lg_messages == s_ev.checkout(leaf).messages
        assert len(lg_messages) == 4 * args.runs
        assert len(s_in.log(leaf)) == len(s_ev.log(leaf)) == args.runs
        assert len(s_in.history(leaf)) == EVENTS_PER_RUN * args.runs

        r = args.repeat
        lg_list = median_time_within(lg_list_all, repeat=r, budget_s=args.budget)
        assert set(listed) == {args.runs}
        lg_get = median_time(lambda: saver.get_tuple(config), repeat=r * 3)
        timings = {}
        for name, store in (("in", s_in), ("ev", s_ev)):
            timings[name] = (
                median_time(lambda s=store: s.log(leaf), repeat=r * 3),
                median_time(lambda s=store: s.history(leaf), repeat=r),
                median_time(lambda s=store: s.checkout(leaf), repeat=r * 3),
            )
    lg_conn.close()

    # --- report ---------------------------------------------------------------------------------
    def sz(p: str) -> str:
        return f"{mb(size[p][0])} + {mb(size[p][1])}"

    print(
        "| measure | LangGraph SqliteSaver | agui-store, HttpAgent inputs | LangGraph / it "
        "| agui-store, no inputs | LangGraph / it |"
    )
    print("|---|---|---|---|---|---|")
    print(
        f"| file MB (db + wal) | {sz(p_lg)} | {sz(p_in)} | {x(total[p_lg] / total[p_in])} "
        f"| {sz(p_ev)} | {x(total[p_lg] / total[p_ev])} |"
    )
    print(
        f"| write all runs s (informative) | {t_lg:.1f} | {t_in:.1f} | {x(t_lg / t_in)} "
        f"| {t_ev:.1f} | {x(t_lg / t_ev)} |"
    )
    log_in, hist_in, co_in = timings["in"]
    log_ev, hist_ev, co_ev = timings["ev"]
    print(
        f"| list the full history ms: list(saver.list) vs store.log(leaf) | {lg_list * 1e3:,.1f} "
        f"| {log_in * 1e3:,.1f} | {x(lg_list / log_in)} | {log_ev * 1e3:,.1f} "
        f"| {x(lg_list / log_ev)} |"
    )
    print(
        f"| ... vs store.history(leaf), every event decoded ms | {lg_list * 1e3:,.1f} "
        f"| {hist_in * 1e3:,.1f} | {x(lg_list / hist_in)} | {hist_ev * 1e3:,.1f} "
        f"| {x(lg_list / hist_ev)} |"
    )
    print(
        f"| restore the leaf ms: get_tuple vs checkout(leaf) | {lg_get * 1e3:,.1f} "
        f"| {co_in * 1e3:,.1f} | {x(lg_get / co_in)} | {co_ev * 1e3:,.1f} "
        f"| {x(lg_get / co_ev)} |"
    )
    print()
    for label, path in (("HttpAgent inputs", p_in), ("no inputs", p_ev)):
        rows = table_sizes(path)
        whole = sum(s for _, s, _, _ in rows)
        print(f"agui-store file, {label}: where the bytes go (dbstat)")
        print("| table or index | MB on disk | share | payload MB |")
        print("|---|---|---|---|")
        for name, on_disk, payload, _ in rows:
            if on_disk / whole >= 0.005:
                print(f"| {name} | {mb(on_disk)} | {on_disk / whole:.1%} | {mb(payload)} |")
        print()

    def verdict(ok: bool) -> str:
        # The goals are stated for 2,000 runs: SqliteSaver's file grows with the square of
        # the conversation's length, agui-store's linearly, so smaller runs cannot judge them.
        if args.runs < GOAL_RUNS:
            return f"not judged below {GOAL_RUNS:,} runs"
        return "met" if ok else "NOT met"

    for label, path in (("HttpAgent inputs", p_in), ("no inputs", p_ev)):
        ratio = total[p_lg] / total[path]
        print(
            f"goal: agui-store's file >= 50x smaller than SqliteSaver's ({label}): "
            f"{x(ratio)} -> {verdict(ratio >= 50)}"
        )
    for label, path in (("HttpAgent inputs", p_in), ("no inputs", p_ev)):
        ratio = total[p_lg] / total[path]
        print(
            f"goal: agui-store's file >= 150x smaller than SqliteSaver's ({label}): "
            f"{x(ratio)} -> {verdict(ratio >= 150)}"
        )
    for label, co in (("HttpAgent inputs", co_in), ("no inputs", co_ev)):
        # One Store read repeatedly (its page cache warm): bench_view opens one per read.
        print(
            f"goal: checkout of the leaf <= 1.0x get_tuple ({label}, one Store): "
            f"{co / lg_get:.2f}x -> {verdict(co <= lg_get)}"
        )
    for label, lst in (("HttpAgent inputs", log_in), ("no inputs", log_ev)):
        ratio = lg_list / lst
        print(
            f"goal: listing the full history >= 10x faster ({label}): "
            f"{x(ratio)} -> {verdict(ratio >= 10)}"
        )
    print(f"(whole benchmark: {time.perf_counter() - started:.0f} s)")


if __name__ == "__main__":
    main()
