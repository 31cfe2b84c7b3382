"""The web viewer: each page's server time against the API call it renders, same run.

Three stores, built first:

- a 10,000-run chain (``--runs``) of 20-event turns (``_common.conversation``);
- a run whose view holds 4,000 messages (``--messages``): a chain of turns of three messages;
- the same 10,000-run chain serves the diff of two runs 10 apart at its tip;
- 60 threads (``--threads``) of 40-run chains, for the threads listing.

Each page is requested from ``agui_store.ui.app`` in process, through the ASGI interface (no
socket: what is timed is the viewer's own work, routing and template included), cold: the
store forgets every cached view before each call (``testing.forget``), as before each
baseline call. Medians of ``--repeat``, page and baseline timed in turns:

- the first screen of the tree (50 runs) vs ``log(limit=50)``, goal <= 3x;
- the run page of the 4,000-message run vs ``checkout`` of it, goal <= 2x (what the run
  changed and its input load after the page opens: their fragments are timed too);
- the diff page of two runs 10 apart at the chain's tip vs ``diff``, goal <= 2x;
- the threads listing's first page (50 threads, each with its first words) vs what
  ``agui-store threads`` reads for as many: each thread's record, branches and a
  ``checkout`` of its newest run, goal <= 2x;
- in headless Chromium over uvicorn: the tree's first screen interactive (Navigation Timing's
  ``domContentLoadedEventEnd``, after the viewer's deferred script ran), goal < 1 s.

    python -m benchmarks.bench_ui [--runs 10000] [--messages 4000] [--threads 60] [--repeat 9]
        [--no-browser]
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import os
import statistics
import threading
import time
from collections.abc import Callable, Sequence
from typing import Any
from urllib.parse import urlencode

import agui_store
import agui_store.ui
from agui_store import testing
from agui_store.ui import pages
from benchmarks._common import conversation, header, scratch_dir


def build_chain(path: str, runs: int, events: int = 20, threads: Sequence[str] = ("t",)) -> None:
    with agui_store.open(path) as store:
        for thread in threads:
            for batch in conversation(thread, runs, events):
                store.append(batch)


def threads_rows(store: agui_store.Store, limit: int) -> None:
    """What ``agui-store threads`` reads for a page of ``limit`` threads: the listing, and
    each thread's record, branches and newest run, whose view holds its first words."""
    for thread in store.threads(recent_first=True)[:limit]:
        store.thread(thread)
        store.branches(thread)
        newest = store.runs(thread, limit=1)
        store.checkout(newest[-1].run_id, thread_id=thread)


class AsgiClient:
    """GET requests straight into an ASGI app, on an event loop that keeps running between
    them, as a server's does (the thread pool's workers are then reused, as in uvicorn)."""

    def __init__(self, app: Any) -> None:
        self.app = app
        self.loop = asyncio.new_event_loop()
        threading.Thread(target=self.loop.run_forever, name="asgi-client", daemon=True).start()

    def get(self, path: str, **params: str) -> float:
        """The server time of one request: from the app being called to its response's
        last byte, timed on the loop (the hop from the calling thread to the loop is the
        harness's, not the server's)."""
        future = asyncio.run_coroutine_threadsafe(self._get(path, urlencode(params)), self.loop)
        return future.result()

    async def _get(self, path: str, query: str) -> float:
        scope = {
            "type": "http", "asgi": {"version": "3.0"}, "http_version": "1.1",
            "method": "GET", "scheme": "http", "path": path, "raw_path": path.encode(),
            "query_string": query.encode(), "root_path": "", "headers": [(b"host", b"bench")],
            "client": ("127.0.0.1", 1), "server": ("bench", 80),
        }
        status: list[int] = []
        body: list[bytes] = []

        async def receive() -> dict[str, Any]:
            return {"type": "http.request", "body": b"", "more_body": False}

        async def send(message: dict[str, Any]) -> None:
            if message["type"] == "http.response.start":
                status.append(message["status"])
            elif message["type"] == "http.response.body":
                body.append(message.get("body", b""))

        started = time.perf_counter()
        await self.app(scope, receive, send)
        elapsed = time.perf_counter() - started
        assert status == [200], (path, query, status, b"".join(body)[:300])
        return elapsed


def in_turns(
    store: agui_store.Store, calls: dict[str, Callable[[], object]], repeat: int
) -> dict[str, float]:
    """Median cold time of each call, the calls taking turns: a page's server time as its
    request reports it, an API call's wall time."""
    times: dict[str, list[float]] = {name: [] for name in calls}
    for _ in range(repeat):
        for name, call in calls.items():
            testing.forget(store)
            gc.collect()  # none pays for the garbage of the call before it
            started = time.perf_counter()
            reported = call()
            elapsed = time.perf_counter() - started
            times[name].append(reported if isinstance(reported, float) else elapsed)
    out = {name: statistics.median(values) for name, values in times.items()}
    # The fastest of each too: on a machine shared by a dozen processes a few-millisecond
    # call is preempted often, a one-millisecond one less so, which skews medians' ratios.
    out.update({f"{name} min": min(values) for name, values in times.items()})
    return out


def browser_interactive(store: agui_store.Store, thread: str, repeat: int) -> list[float]:
    """Seconds from navigation to the tree's first screen being interactive, each load."""
    from tests.ui_browser import (
        browser_unavailable,
        page_ready,
        serving,
        start_chromium,
        wait_until,
    )

    reason = browser_unavailable()
    if reason:
        raise SystemExit(f"no browser: {reason} (or pass --no-browser)")
    driver = start_chromium()
    out = []
    try:
        with serving(agui_store.ui.app(store)) as base:
            url = f"{base}/thread?{urlencode({'thread': thread})}"
            driver.get(url)  # warms the browser's own caches (the stylesheet and script)
            for _ in range(repeat):
                driver.get("about:blank")
                driver.get(url)
                wait_until(driver, page_ready, "the tree page")
                ms = driver.execute_script(
                    "const n = performance.getEntriesByType('navigation')[0];"
                    "return n.domContentLoadedEventEnd - n.startTime;"
                )
                out.append(ms / 1000)
    finally:
        driver.quit()
    return out


def verdict(ratio: float, goal: float) -> str:
    return "met" if ratio <= goal else "NOT met"


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=10_000)
    parser.add_argument("--messages", type=int, default=4_000)
    parser.add_argument("--threads", type=int, default=60)
    parser.add_argument("--repeat", type=int, default=9)
    parser.add_argument("--no-browser", action="store_true")
    args = parser.parse_args()
    header(f"web viewer: pages vs the API calls they render ({args.runs:,}-run chain, "
           f"{args.messages:,}-message run)")
    folder = scratch_dir("agui-bench-ui-")
    chain_path = os.path.join(folder, "chain.db")
    long_path = os.path.join(folder, "long.db")
    many_path = os.path.join(folder, "threads.db")
    t0 = time.perf_counter()
    build_chain(chain_path, args.runs)
    build_chain(long_path, -(-args.messages // 3))  # three messages a turn
    build_chain(many_path, 40, threads=[f"t{i}" for i in range(args.threads)])
    print(f"built in {time.perf_counter() - t0:.0f} s")

    rows = []
    with agui_store.open(chain_path) as store:
        client = AsgiClient(agui_store.ui.app(store))
        tip = store.log("HEAD", thread_id="t", limit=11)
        older, newest = tip[10].run_id, tip[0].run_id
        tree = in_turns(store, {
            "page": lambda: client.get("/thread", thread="t"),
            "log": lambda: store.log("HEAD", thread_id="t", limit=50),
        }, args.repeat)
        rows.append(("tree, first screen (50 runs)", "log(limit=50)", tree, 3.0))
        diff = in_turns(store, {
            "page": lambda: client.get("/diff", thread="t", a=older, b=newest),
            "diff": lambda: store.diff(older, newest, thread_id="t"),
        }, args.repeat)
        rows.append(("diff page, tip~10 ... tip", "diff(tip~10, tip)", diff, 2.0))
        interactive = [] if args.no_browser else browser_interactive(store, "t", args.repeat)
    with agui_store.open(long_path) as store:
        client = AsgiClient(agui_store.ui.app(store))
        run_id = store.log("HEAD", thread_id="t", limit=1)[0].run_id
        count = len(store.checkout(run_id, thread_id="t").messages)
        run = in_turns(store, {
            "page": lambda: client.get("/run", thread="t", run=run_id),
            "checkout": lambda: store.checkout(run_id, thread_id="t"),
            "changes": lambda: client.get("/run/changes", thread="t", run=run_id),
            "input": lambda: client.get("/run/input", thread="t", run=run_id),
        }, args.repeat)
        rows.append((f"run page, {count:,} messages", "checkout(run)", run, 2.0))
    with agui_store.open(many_path) as store:
        client = AsgiClient(agui_store.ui.app(store))
        shown = min(pages.THREADS_PAGE, args.threads)  # the page holds what there is
        listing = in_turns(store, {
            "page": lambda: client.get("/"),
            "rows": lambda: threads_rows(store, shown),
        }, args.repeat)
        rows.append((f"threads, first page ({shown} of {args.threads})",
                     f"agui-store threads' reads ({shown} rows)", listing, 2.0))

    print("| page | baseline | page, cold, ms (fastest) | baseline, cold, ms (fastest) "
          "| ratio of medians (of fastest) | goal |")
    print("|---|---|---|---|---|---|")
    for page, baseline, figures, goal in rows:
        base_name = next(k for k in figures if k != "page" and not k.endswith(" min"))
        ratio = figures["page"] / figures[base_name]
        best = figures["page min"] / figures[f"{base_name} min"]
        print(f"| {page} | {baseline} | {figures['page'] * 1e3:.2f} "
              f"({figures['page min'] * 1e3:.2f}) | {figures[base_name] * 1e3:.2f} "
              f"({figures[f'{base_name} min'] * 1e3:.2f}) | {ratio:.2f}x ({best:.2f}x) "
              f"| <= {goal:g}x: {verdict(ratio, goal)} ({verdict(best, goal)}) |")
    print(f"run page's parts loaded after it opens: what the run changed "
          f"{run['changes'] * 1e3:.1f} ms, its input {run['input'] * 1e3:.1f} ms "
          f"(checkout {run['checkout'] * 1e3:.1f} ms)")
    if interactive:
        median = statistics.median(interactive)
        print(f"tree's first screen interactive in headless Chromium: median "
              f"{median * 1e3:.0f} ms over {len(interactive)} loads "
              f"(min {min(interactive) * 1e3:.0f}, max {max(interactive) * 1e3:.0f}); "
              f"goal < 1 s: {'met' if median < 1 else 'NOT met'}")
    print(f"load average over the last minute: {os.getloadavg()[0]:.1f} "
          f"({os.cpu_count()} cores): wall times grow with it")


if __name__ == "__main__":
    main()
