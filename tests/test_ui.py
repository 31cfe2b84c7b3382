"""The web viewer's pages, in process: what they show is what the API returns.

Each page is read back as a tree of elements (``tests/ui_pages.py``) and compared with the
call it renders: a run page's messages with ``checkout``, a diff page with ``diff``, the run
tree with ``runs``, the fork page with ``fork``. The browser tests (``test_ui_browser.py``)
drive the same pages in a real Chromium.
"""

from __future__ import annotations

import asyncio
import email.message
import email.utils
import json
import os
import re
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

import jinja2
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from markupsafe import Markup, escape
from starlette.applications import Starlette
from starlette.routing import Mount
from starlette.testclient import TestClient

import agui_store
import agui_store.aio
import agui_store.ui
from agui_store.errors import ArgumentTypeError
from agui_store.ui import pages, text
from tests.conftest import fixture_params
from tests.ui_pages import (
    Element,
    assert_run_page_shows_checkout,
    client_of,
    embedded_json,
    get,
    one_run,
    parse,
    said,
    shown_messages,
    started,
    url,
)


@pytest.fixture
def store(tmp_path: Path) -> Iterator[agui_store.Store]:
    with agui_store.open(tmp_path / "ui.db") as opened:
        yield opened


def change_kind(block: Element) -> str:
    """What a change block says happened to its message (its ``k-...`` class)."""
    return next(c[2:] for c in sorted(block.classes) if c.startswith("k-"))


# --- the upstream recordings ----------------------------------------------------------------


@pytest.mark.parametrize("events", fixture_params())
def test_every_recorded_runs_page_shows_the_messages_state_and_events_the_api_returns(
    store: agui_store.Store, events: list[dict[str, Any]]
) -> None:
    store.append(json.loads(json.dumps(events)))
    client = client_of(store)
    for thread in store.threads():
        tree = get(client, "/thread", thread=thread)
        runs = store.runs(thread)
        assert [r.attrs["data-run"] for r in tree.find_all("run-row")] == [
            r.run_id for r in reversed(runs)
        ]
        for run in runs:
            assert_run_page_shows_checkout(client, store, thread, run.run_id)
            recorded = store.input(run.run_id, thread_id=thread)
            response = client.get(url("/run/input", thread=thread, run=run.run_id))
            assert response.json() == json.loads(text.dumps(recorded))
            fork = get(client, "/fork", thread=thread, run=run.run_id).by_id("fork-body")
            assert fork is not None
            body = json.loads(fork.text)
            expected = store.fork(run.run_id, thread_id=thread)
            assert {**body, "runId": None} == {**json.loads(text.dumps(expected)), "runId": None}


# --- generated threads with branches ----------------------------------------------------------


@st.composite
def branched_threads(draw: st.DrawFn) -> list[tuple[int | None, str]]:
    """Runs r0, r1...: (the index of the run's parent, the words its user says)."""
    n = draw(st.integers(2, 12))
    words = st.text(alphabet="abc xyz<>&\"'", min_size=1, max_size=12)
    runs: list[tuple[int | None, str]] = [(None, draw(words))]
    for i in range(1, n):
        runs.append((draw(st.integers(0, i - 1)), draw(words)))
    return runs


def record_branched(store: agui_store.Store, runs: list[tuple[int | None, str]]) -> None:
    for i, (parent, words) in enumerate(runs):
        base = store.checkout(f"r{parent}", thread_id="t").messages if parent is not None else []
        body = [
            {"type": "MESSAGES_SNAPSHOT",
             "messages": [*base, {"id": f"u{i}", "role": "user", "content": words}]},
            *said(f"a{i}", f"answer {i}: {words}"),
            {"type": "STATE_SNAPSHOT", "snapshot": {"turn": i, "words": words}},
        ]
        store.append(one_run("t", f"r{i}", body), parent=f"r{parent}" if parent is not None
                     else None)
    store.branch("side", f"r{len(runs) // 2}", thread_id="t")


@settings(max_examples=15, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(runs=branched_threads(), data=st.data())
def test_generated_branched_threads_show_their_tree_runs_and_diffs_as_the_api_returns_them(
    tmp_path_factory: pytest.TempPathFactory, runs: list[tuple[int | None, str]],
    data: st.DataObject,
) -> None:
    with agui_store.open(tmp_path_factory.mktemp("gen") / "s.db") as store:
        record_branched(store, runs)
        client = client_of(store)
        tree = get(client, "/thread", thread="t")
        rows = tree.find_all("run-row")
        newest_first = list(reversed(store.runs("t")))
        assert [r.attrs["data-run"] for r in rows] == [r.run_id for r in newest_first]
        for row, run in zip(rows, newest_first):
            assert row.attrs["data-status"] == run.status
            assert [ref.text for ref in row.find_all("ref")] == list(run.branches)
        a = f"r{data.draw(st.integers(0, len(runs) - 1), label='a')}"
        b = f"r{data.draw(st.integers(0, len(runs) - 1), label='b')}"
        assert_run_page_shows_checkout(client, store, "t", b)
        for mode in ("three-dot", "two-dot"):
            d = store.diff(a, b, thread_id="t", mode=mode)
            page = get(client, "/diff", thread="t", a=a, b=b, mode=mode)
            base = page.by_id("merge-base")
            assert base is not None
            assert (d.merge_base.run_id if d.merge_base else "none") in base.text
            sides = page.find_all("side")
            changes = [d.a_changes, d.changes] if mode == "three-dot" else [d.changes]
            assert len(sides) == len(changes)
            for side, change in zip(sides, changes):
                assert change is not None
                shown = [(c.attrs["data-id"], change_kind(c)) for c in side.find_all("change")]
                assert shown == [(str(m.id), m.kind) for m in change.messages]
                patch = side.find("patch", "pre")
                assert (json.loads(patch.text) if patch else []) == change.state_patch


def test_a_changed_message_marks_the_words_each_side_lacks(store: agui_store.Store) -> None:
    store.append(one_run("t", "r0", [*said("a", "the sky is blue today", "user")]))
    store.append(one_run("t", "r1", [{"type": "MESSAGES_SNAPSHOT", "messages": [
        {"id": "a", "role": "user", "content": "the sky is grey today"}]}]), parent="r0")
    page = get(client_of(store), "/diff", thread="t", a="r0", b="r1", mode="two-dot")
    change = page.find("k-modified")
    assert change is not None
    assert [d.text for d in change.find_all(tag="del")] == ["blue"]
    assert [i.text for i in change.find_all(tag="ins")] == ["grey"]


def test_a_change_past_where_a_long_message_is_cut_is_in_view_and_each_side_links_to_its_run(
    store: agui_store.Store,
) -> None:
    long = "lorem " * 5000  # past what a page shows inline

    def answer(run: str, verdict: str, parent: str | None) -> None:
        store.append(one_run("t", run, [{"type": "MESSAGES_SNAPSHOT", "messages": [
            {"id": "q", "role": "user", "content": "write a long doc"},
            {"id": "a", "role": "assistant", "content": long + verdict}]}]), parent=parent)

    answer("r0", "VERDICT: approved", None)
    answer("r1", "VERDICT: rejected", "r0")
    answer("r2", "VERDICT: postponed", "r0")
    client = client_of(store)

    def whole(block: Element) -> Any:
        link = block.find("clipped").find(tag="a")  # type: ignore[union-attr]
        assert link is not None
        return client.get(link.attrs["href"]).json()["content"]

    two_dot = get(client, "/diff", thread="t", a="r0", b="r1", mode="two-dot")
    change = two_dot.find("k-modified")
    assert change is not None
    assert [d.text for d in change.find_all(tag="del")] == ["approved"]
    assert [i.text for i in change.find_all(tag="ins")] == ["rejected"]
    was, now = change.find("was"), change.find("now")
    assert was is not None and now is not None
    assert "earlier characters, unchanged, not shown" in was.find("clipped").text  # type: ignore[union-attr]
    assert (whole(was), whole(now)) == (long + "VERDICT: approved", long + "VERDICT: rejected")
    # Three-dot: each side's "before" is the merge base's message.
    three_dot = get(client, "/diff", thread="t", a="r1", b="r2")
    sides = [side.find("k-modified") for side in three_dot.find_all("side")]
    assert [(whole(s.find("was")), whole(s.find("now"))) for s in sides if s] == [  # type: ignore[arg-type]
        (long + "VERDICT: approved", long + "VERDICT: rejected"),
        (long + "VERDICT: approved", long + "VERDICT: postponed"),
    ]
    changes = get(client, "/run/changes", thread="t", run="r2").find("k-modified")
    assert changes is not None
    assert [i.text for i in changes.find_all(tag="ins")] == ["postponed"]
    assert whole(changes) == long + "VERDICT: postponed"


def test_a_runs_page_counts_its_messages_in_words_that_agree_with_the_count(
    store: agui_store.Store,
) -> None:
    store.append(one_run("t", "r0", []))
    store.append(one_run("t", "r1", said("a", "hello")))
    store.append(one_run("t", "r2", said("b", "again")))
    client = client_of(store)
    headings = {}
    for run in ("r0", "r1", "r2"):
        heading = get(client, "/run", thread="t", run=run).find("conversation", "section")
        assert heading is not None
        headings[run] = " ".join(heading.find(tag="h2").text.split())  # type: ignore[union-attr]
    assert headings["r0"].endswith("· 0 messages")
    assert headings["r1"].endswith("· 1 message")
    assert headings["r2"].endswith("· 2 messages")


def test_a_runs_page_shows_what_it_changed_as_before_after_and_the_diffs_patch(
    store: agui_store.Store,
) -> None:
    store.append(one_run("t", "r0", [{"type": "STATE_SNAPSHOT", "snapshot": {"n": 1}}]))
    store.append(one_run("t", "r1", [
        {"type": "STATE_DELTA", "delta": [{"op": "replace", "path": "/n", "value": 2}]},
        *said("a1", "two")]), parent="r0")
    page = get(client_of(store), "/run/changes", thread="t", run="r1")
    assert embedded_json(page, "before-data") == {"n": 1}
    assert embedded_json(page, "after-data") == {"n": 2}
    patch = page.find("patch")
    assert patch is not None
    d = store.diff("r0", "r1", thread_id="t", mode="two-dot")
    assert json.loads(patch.text) == d.state_patch
    assert [change_kind(c) for c in page.find_all("change")] == ["added"]


# --- the run tree, a page at a time -------------------------------------------------------------


def test_a_long_threads_tree_pages_newest_first_and_each_page_continues_the_lanes(
    store: agui_store.Store,
) -> None:
    for i in range(120):
        store.append(one_run("t", f"r{i}", []), parent=f"r{i // 2}" if i else None)
    client = client_of(store)
    tree = get(client, "/thread", thread="t")
    seen = [r.attrs["data-run"] for r in tree.find_all("run-row")]
    assert len(seen) == pages.TREE_PAGE
    more = tree.find("more", "button")
    while more is not None:
        fragment = client.get(more.attrs["data-href"])
        assert fragment.status_code == 200
        part = parse(fragment.text)
        seen += [r.attrs["data-run"] for r in part.find_all("run-row")]
        more = part.find("more", "button")
    assert seen == [r.run_id for r in reversed(store.runs("t"))]
    # One page at a time draws the lanes the whole tree draws.
    whole = pages.Lanes().layout(list(reversed(store.runs("t"))))
    paged: list[pages.Row] = []
    lanes = pages.Lanes()
    for start in range(0, 120, 50):
        paged += lanes.layout(list(reversed(store.runs("t")))[start:start + 50])
    assert paged == whole


@pytest.mark.parametrize("count", [pages.TREE_PAGE, 2 * pages.TREE_PAGE])
def test_a_thread_of_whole_pages_of_runs_offers_no_older_runs_past_its_last(
    store: agui_store.Store, count: int
) -> None:
    for i in range(count):
        store.append(one_run("t", f"r{i}", []))
    client = client_of(store)
    page = get(client, "/thread", thread="t")
    seen = [r.attrs["data-run"] for r in page.find_all("run-row")]
    more = page.find("more", "button")
    while more is not None:
        part = parse(client.get(more.attrs["data-href"]).text)
        rows = [r.attrs["data-run"] for r in part.find_all("run-row")]
        assert rows, "an 'Older runs' button that loads nothing"
        seen += rows
        more = part.find("more", "button")
    assert seen == [r.run_id for r in reversed(store.runs("t"))]


def test_a_run_with_several_children_is_marked_as_a_fork_point_and_inferred_lineage_as_such(
    store: agui_store.Store,
) -> None:
    store.append(one_run("t", "r0", said("a0", "hello", "user")))
    store.append(one_run("t", "r1", []), parent="r0")
    store.append(one_run("t", "r2", [], parentRunId="r0"))
    store.append(one_run("t", "r3", []))  # placed by the store: the thread's head
    rows = {r.attrs["data-run"]: r for r in get(client_of(store), "/thread", thread="t")
            .find_all("run-row")}
    assert rows["r0"].find("fork-point") is not None
    assert rows["r1"].find("fork-point") is None
    lineage = {run: row.find("lineage").text for run, row in rows.items()}  # type: ignore[union-attr]
    assert lineage == {"r3": "inferred: head", "r2": "declared: parentRunId",
                       "r1": "declared: explicit", "r0": "root"}


# --- threads ------------------------------------------------------------------------------------


def test_threads_are_listed_with_owner_runs_and_branches_and_found_by_id_or_message_text(
    store: agui_store.Store,
) -> None:
    store.append(one_run("weather", "w1", said("u", "Is it raining in Oslo?", "user")),
                 scope="alice")
    store.append(one_run("weather", "w2", []), scope="alice")
    store.branch("retry", "w1", thread_id="weather")
    store.append(one_run("recipes", "c1", said("u", "A soup, please", "user")))
    client = client_of(store)
    rows = {r.attrs["data-thread"]: r for r in get(client, "/").find_all(tag="tr")
            if "data-thread" in r.attrs}
    assert set(rows) == {"weather", "recipes"}
    cells = [c.text.strip() for c in rows["weather"].find_all(tag="td")]
    assert cells[:4] == ["weather", "Is it raining in Oslo?", "alice", "2"]
    assert "retry" in cells[4]
    found = get(client, "/", q="oslo").find_all(tag="tr")
    assert [r.attrs["data-thread"] for r in found if "data-thread" in r.attrs] == ["weather"]
    found = get(client, "/", q="recip").find_all(tag="tr")
    assert [r.attrs["data-thread"] for r in found if "data-thread" in r.attrs] == ["recipes"]


def test_a_query_that_finds_nothing_is_named_in_a_line_not_in_screens_of_it(
    store: agui_store.Store,
) -> None:
    store.append(one_run("recipes", "c1", said("u", "A soup, please", "user")))
    client = client_of(store)
    # Past 1,000 characters the search refuses the query, and only the threads say so.
    for query, empty in (("x" * 10_000, 1), (" ".join(f"nothing{i:03}" for i in range(30)), 2)):
        page = get(client, "/", q=query)
        said_empty = [p.text for p in page.find_all(cls="empty")]
        assert len(said_empty) == empty, said_empty
        for line in said_empty:
            assert len(line) < 140 and "…" in line, line[:200]
            assert line.split("“")[1].rstrip("…”.") in query


def test_each_thread_is_listed_with_the_first_words_agui_store_threads_shows_cut_and_escaped(
    store: agui_store.Store,
) -> None:
    long = "Wie ist das Wetter in <b>Zürich</b> & Bern?\n" + "Und morgen? " * 40
    store.append(one_run("weather", "w1", said("u1", long, "user")))
    store.append(one_run("weather", "w2", [
        {"type": "MESSAGES_SNAPSHOT", "messages": [
            *store.checkout("w1", thread_id="weather").messages,
            {"id": "u2", "role": "user", "content": "And in Basel?"},
        ]},
    ]))
    image = {"type": "image", "source": {"type": "url", "value": "https://x/y.png"}}
    store.append(one_run("parts", "p1", [{"type": "MESSAGES_SNAPSHOT", "messages": [
        {"id": "u", "role": "user", "content": [{"type": "text", "text": "Describe"}, image]},
    ]}]))
    store.append(one_run("silent", "s1", said("a", "nobody asked")))
    store.append([started("empty", "e1")])
    listed = subprocess.run(
        [sys.executable, "-m", "agui_store", "threads", "--json", "--db", store.path],
        capture_output=True, text=True, check=True,
        env={**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[1])},
    )
    cli_words = {row["threadId"]: row["firstWords"] for row in json.loads(listed.stdout)}
    response = client_of(store).get("/")
    assert "<b>Zürich" not in response.text  # escaped, never markup
    rows = {r.attrs["data-thread"]: r for r in parse(response.text).find_all(tag="tr")
            if "data-thread" in r.attrs}
    shown = {thread: row.find("first-words") for thread, row in rows.items()}
    words = {thread: cell.text.strip() for thread, cell in shown.items() if cell is not None}
    assert set(words) == set(cli_words) == {"weather", "parts", "silent", "empty"}
    assert words["weather"].startswith("Wie ist das Wetter in <b>Zürich</b> & Bern? Und morgen?")
    assert words["weather"].endswith("…") and len(words["weather"]) == pages.FIRST_WORDS_CHARS
    assert " ".join(cli_words["weather"].split()).startswith(words["weather"][:-1])
    assert words["parts"] == cli_words["parts"].replace("\n", " ") == "Describe [image]"
    assert cli_words["silent"] == cli_words["empty"] == ""
    assert words["silent"] == words["empty"] == "—"


def test_a_threads_last_activity_is_its_latest_write_to_any_run_and_its_open_runs_show(
    store: agui_store.Store,
) -> None:
    def pause() -> None:  # runs record times to the millisecond
        time.sleep(0.01)

    store.append([started("long", "slow"), *said("s", "thinking...")[:2]])  # left open
    store.append(one_run("long", "fast", said("f", "quick")))
    pause()
    store.append(one_run("short", "s1", []))
    pause()
    store.append([{"type": "TEXT_MESSAGE_CONTENT", "messageId": "s", "delta": " still"}],
                 thread_id="long", run_id="slow")
    store.append([started("idle", "waiting")])
    pause()
    store.append(one_run("idle", "done", []))
    page = get(client_of(store), "/")
    rows = [r for r in page.find_all(tag="tr") if "data-thread" in r.attrs]
    assert [r.attrs["data-thread"] for r in rows] == store.threads(recent_first=True)
    shown = {r.attrs["data-thread"]: r for r in rows}
    for thread, latest in [("long", "slow"), ("short", "s1"), ("idle", "done")]:
        run = store.get_run(latest, thread_id=thread)
        assert run is not None
        assert max(r.updated_at or r.created_at for r in store.runs(thread)) == run.updated_at
        cells = shown[thread].find_all(tag="td")
        assert cells[5].find(tag="code").text == latest  # type: ignore[union-attr]
        assert cells[6].text.strip() == run.updated_at.strftime("%Y-%m-%d %H:%M:%S")  # type: ignore[union-attr]
    assert "open" in shown["long"].find_all(tag="td")[5].text
    # A run still recording is shown when another was written to last.
    still_open = shown["idle"].find("open-runs")
    assert still_open is not None and still_open.text == "1 open"
    assert shown["short"].find("open-runs") is None


@pytest.mark.parametrize("at_once", [2, 50], ids=["some-threads-searched-alone", "one-search"])
def test_a_query_lists_every_thread_the_search_finds_it_in_whatever_its_hits(
    store: agui_store.Store, monkeypatch: pytest.MonkeyPatch, at_once: int
) -> None:
    # The listing reads `at_once` hits of one search first; a thread none of them named is
    # searched alone.
    monkeypatch.setattr(pages, "THREADS_FOUND_AT_ONCE", at_once)
    store.append(one_run("old", "o1", said("u", "Porto in spring", "user")))
    store.append(one_run("quiet", "q1", said("u", "Lisbon", "user")))
    store.append(one_run("middle", "m1", said("u", "porto again", "user")))
    for i in range(3):
        store.append(one_run("chatty", f"c{i}", said(f"u{i}", f"porto {i}", "user")))
    client = client_of(store)
    found = get(client, "/", q="porto").find_all(tag="tr")
    listed = [r.attrs["data-thread"] for r in found if "data-thread" in r.attrs]
    assert listed == ["chatty", "middle", "old"]


def test_a_word_with_many_hits_in_one_old_thread_costs_a_few_searches_whatever_the_threads(
    store: agui_store.Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    for i in range(pages.THREADS_FOUND_AT_ONCE + 10):
        store.append(one_run("hay", f"h{i}", said(f"h{i}", f"haystack {i}", "user")))
    for i in range(300):
        store.append(one_run(f"conv-{i:03}", f"c{i}", said(f"c{i}", "hello", "user")))
    searches: list[str | None] = []
    search = store.search

    def counted(query: str, **options: Any) -> agui_store.SearchHits:
        searches.append(options.get("thread_id"))
        return search(query, **options)

    monkeypatch.setattr(store, "search", counted)
    found = get(client_of(store), "/", q="haystack").find_all(tag="tr")
    assert [r.attrs["data-thread"] for r in found if "data-thread" in r.attrs] == ["hay"]
    assert len(searches) < 20, f"{len(searches)} searches, {sum(map(bool, searches))} alone"


def test_the_search_box_lists_the_messages_the_index_finds_each_linking_to_it_in_its_run(
    store: agui_store.Store,
) -> None:
    store.append(one_run("trip", "r1", said("u1", "Book the Porto hotel, please", "user")))
    store.append(one_run("trip", "r2", said("a1", "Booked: Hotel Porto Ribeira")))
    store.append(one_run("other", "x1", said("u9", "nothing to see", "user")), scope="bob")
    client = client_of(store)
    page = get(client, "/", q="porto hotel")
    hits = page.find_all(cls="hit")
    assert [h.attrs["data-message"] for h in hits] == ["a1", "u1"]
    assert [m.text for m in hits[1].find_all(tag="mark")] == ["Porto", "hotel"]
    link = hits[1].find(cls="hit-link")
    assert link is not None
    assert link.attrs["href"] == "/run?thread=trip&run=r1&all_messages=1&q=porto+hotel#msg-0"
    run_page = get(client, "/run", thread="trip", run="r1", all_messages="1")
    target = run_page.by_id("msg-0")
    assert target is not None and target.attrs["data-index"] == "0"
    more = get(client, "/", q="porto")
    assert more.find(cls="next-hits") is None
    past = get(client, "/", q="porto", cursor="1")  # a cursor below every hit
    empty = past.find(cls="empty")
    assert empty is not None and "No more messages hold" in empty.text
    for cursor in ("x1", "9" * 23):  # not digits; digits past any key the store gives
        note = get(client, "/", q="porto", cursor=cursor).find(cls="warning")
        assert note is not None and "not one this viewer made" in note.text
        assert "next_cursor" not in note.text
    assert client.get("/?after=-100").status_code == 400
    wrong = get(client, "/", q='"porto')
    warning = wrong.find(cls="warning")
    assert warning is not None and "quote is not closed" in warning.text
    scoped = get(client_of(store, scope="bob"), "/", q="porto")
    assert scoped.find_all(cls="hit") == []


@pytest.mark.parametrize("words", ["lorem ipsum ", "Zürich grüßt "])
def test_a_hit_past_where_a_long_message_is_cut_links_to_it_shown_from_a_little_before_the_word(
    store: agui_store.Store, words: str
) -> None:
    long = words * 2500 + "then the Zanzibar ferry"
    store.append(one_run("t", "r1", said("u1", "a short question", "user") + said("a1", long)))
    client = client_of(store)
    (hit,) = get(client, "/", q="zanzibar").find_all(cls="hit")
    link = hit.find(cls="hit-link")
    assert link is not None
    message = parse(client.get(link.attrs["href"]).text).by_id("msg-1")
    assert message is not None
    shown = message.find(cls="msg-text")
    assert shown is not None and "then the Zanzibar ferry" in shown.text
    skipped = len(long) - len(shown.text)
    assert long[skipped - 1] == " " and long[skipped] != " "  # from a word, not inside one
    note = message.find(cls="clipped")
    assert note is not None
    assert f"{skipped:,} earlier characters not shown" in note.text
    whole = [a.attrs["href"] for a in note.find_all(tag="a")]
    assert whole == [
        "/run?thread=t&run=r1&all_messages=1#msg-1", "/run/message?thread=t&run=r1&index=1"
    ]
    from_start = parse(client.get(whole[0]).text).by_id("msg-1")
    assert from_start is not None and from_start.find(cls="msg-text").text.startswith(words)
    # A word the page shows from the start, a query that is not a search: no jump.
    for query in ("lorem grüßt", '"zanzibar'):
        page = get(client, "/run", thread="t", run="r1", q=query).by_id("msg-1")
        assert page is not None and page.find(cls="msg-text").text.startswith(words)


def called(call_id: str, name: str, arguments: str, result: str) -> list[dict[str, Any]]:
    """A tool call with its arguments, and its result."""
    return [
        {"type": "TOOL_CALL_START", "toolCallId": call_id, "toolCallName": name},
        {"type": "TOOL_CALL_ARGS", "toolCallId": call_id, "delta": arguments},
        {"type": "TOOL_CALL_END", "toolCallId": call_id},
        {"type": "TOOL_CALL_RESULT", "messageId": f"{call_id}-result", "toolCallId": call_id,
         "content": result},
    ]


@pytest.mark.parametrize("words", ["lorem ipsum ", "Zürich grüßt "])
@pytest.mark.parametrize("where", ["arguments", "result"])
def test_a_hit_past_where_a_long_tool_call_or_result_is_cut_shows_it_from_a_little_before_the_word(
    store: agui_store.Store, words: str, where: str
) -> None:
    # JSON, as tools take and give: the word stands after a line break, written "\n".
    long = json.dumps({"lines": words * 2500 + "then the\nZanzibar ferry"})
    short = json.dumps({"lines": "nothing"})
    arguments, result = (long, short) if where == "arguments" else (short, long)
    store.append(one_run("t", "r1", said("u1", "a long read", "user")
                         + called("c1", "read_log", arguments, result)))
    client = client_of(store)
    (hit,) = get(client, "/", q="zanzibar").find_all(cls="hit")
    link = hit.find(cls="hit-link")
    assert link is not None
    index = 1 if where == "arguments" else 2
    assert link.attrs["href"].endswith(f"#msg-{index}")
    message = parse(client.get(link.attrs["href"]).text).by_id(f"msg-{index}")
    assert message is not None
    shown = message.find(cls="args" if where == "arguments" else "msg-text")
    assert shown is not None and "Zanzibar ferry" in shown.text
    # What the page shows of the whole: the arguments and the result indented, decoded.
    long = json.dumps(json.loads(long), indent=2, ensure_ascii=False)
    skipped = len(long) - len(shown.text)
    assert skipped > 0 and long.endswith(shown.text)
    assert long[skipped - 1] == " " and long[skipped] != " "  # from a word, not inside one
    (note, *_) = message.find_all(cls="clipped")
    assert f"{skipped:,} earlier characters" in note.text
    assert "from a little before “zanzibar”" in note.text
    whole = [a.attrs["href"] for a in note.find_all(tag="a")]
    assert whole == [
        f"/run?thread=t&run=r1&all_messages=1#msg-{index}",
        f"/run/message?thread=t&run=r1&index={index}",
    ]
    from_start = parse(client.get(whole[0]).text).by_id(f"msg-{index}")
    assert from_start is not None
    start = from_start.find(cls="args" if where == "arguments" else "msg-text")
    assert start is not None and "lines" in start.text.split(words)[0]


def test_a_hit_in_a_tool_result_sharing_its_calls_id_links_to_the_result(
    store: agui_store.Store,
) -> None:
    # Some producers (the .NET server among them) give a tool result its call's id.
    store.append([
        {"type": "RUN_STARTED", "threadId": "t", "runId": "r1"},
        {"type": "TOOL_CALL_START", "toolCallId": "call_1", "toolCallName": "find_hotel",
         "parentMessageId": "call_1"},
        {"type": "TOOL_CALL_ARGS", "toolCallId": "call_1", "delta": '{"city": "Porto"}'},
        {"type": "TOOL_CALL_END", "toolCallId": "call_1"},
        {"type": "TOOL_CALL_RESULT", "messageId": "call_1", "toolCallId": "call_1",
         "content": "Hotel Ribeira, Seattle street"},
        {"type": "RUN_FINISHED", "threadId": "t", "runId": "r1"},
    ])  # fmt: skip
    messages = store.checkout("r1", thread_id="t").messages
    assert [m["id"] for m in messages] == ["call_1", "call_1"]
    client = client_of(store)
    (hit,) = get(client, "/", q="seattle").find_all(cls="hit")
    link = hit.find(cls="hit-link")
    assert link is not None and link.attrs["href"].endswith("#msg-1")
    run_page = get(client, "/run", thread="t", run="r1", all_messages="1")
    target = run_page.by_id("msg-1")
    assert target is not None and "role-tool" in target.attrs["class"]


def test_the_threads_listing_pages(store: agui_store.Store) -> None:
    for i in range(pages.THREADS_PAGE + 5):
        store.append(one_run(f"t{i:03}", "r", []))
    client = client_of(store)
    first = get(client, "/")
    link = first.find("next", "a")
    assert link is not None
    second = parse(client.get(link.attrs["href"]).text)
    listed = [r.attrs["data-thread"] for p in (first, second) for r in p.find_all(tag="tr")
              if "data-thread" in r.attrs]
    assert listed == list(reversed(store.threads()))


def threads_listed(page: Element) -> list[str]:
    return [r.attrs["data-thread"] for r in page.find_all(tag="tr") if "data-thread" in r.attrs]


def test_the_next_page_of_threads_continues_after_the_last_one_shown_whatever_was_written_since(
    store: agui_store.Store,
) -> None:
    for i in range(pages.THREADS_PAGE + 10):
        store.append(one_run(f"t{i:03}", "r", []))
        time.sleep(0.002)  # each its own millisecond: threads written in one tie
    client = client_of(store)
    first = get(client, "/")
    link = first.find("next", "a")
    assert link is not None
    store.append(one_run("t005", "again", []))  # moves a thread of the next page to the top
    second = parse(client.get(link.attrs["href"]).text)
    shown = threads_listed(first)
    order = store.threads(recent_first=True)
    assert threads_listed(second) == order[order.index(shown[-1]) + 1:]
    assert not set(threads_listed(second)) & set(shown)
    # Past the last thread, the page says there are no more, not that the store is empty.
    last = get(client, "/", before=order[-1])
    assert [p.text for p in last.find_all("empty")] == ["No more threads."]
    # The thread the page continues from, written to since (it moved to the top), or erased:
    # the page continues where it was, by the time of its last write the link holds.
    below = threads_listed(second)
    store.append(one_run(shown[-1], "again", []))
    assert threads_listed(parse(client.get(link.attrs["href"]).text)) == below
    store.delete_thread(shown[-1])
    assert threads_listed(parse(client.get(link.attrs["href"]).text)) == below
    # A link that holds no time (typed by hand) to a thread erased since says so.
    gone = get(client, "/", before=shown[-1])
    warning = gone.find("warning")
    assert warning is not None and "no longer in the store" in warning.text
    assert not gone.find_all("empty")
    # A link from before the cursor, by position, still leads to that page.
    moved = client.get(url("/", after=str(pages.THREADS_PAGE)), follow_redirects=False)
    assert moved.status_code == 303
    order = store.threads(recent_first=True)
    assert moved.headers["location"] == url("/", before=order[pages.THREADS_PAGE - 1])


def test_paging_the_threads_a_search_finds_keeps_the_page_of_its_hits_and_the_other_way(
    store: agui_store.Store,
) -> None:
    for i in range(max(pages.THREADS_PAGE, pages.HITS_PAGE) + 5):
        store.append(one_run(f"t{i:03}", "r", said(f"m{i}", f"porto {i}", "user")))
    client = client_of(store)
    first = get(client, "/", q="porto")
    more_hits, more_threads = first.find(cls="next-hits"), first.find("next", "a")
    assert more_hits is not None and more_threads is not None
    on_hits = parse(client.get(more_hits.attrs["href"]).text)
    next_threads = on_hits.find("next", "a")
    assert next_threads is not None and "cursor=" in next_threads.attrs["href"]
    both = parse(client.get(next_threads.attrs["href"]).text)
    # The hits stay on their second page while the threads go to theirs.
    hit_ids = [h.attrs["data-message"] for h in both.find_all(cls="hit")]
    assert hit_ids == [h.attrs["data-message"] for h in on_hits.find_all(cls="hit")]
    rows = [r.attrs["data-thread"] for r in both.find_all(tag="tr") if "data-thread" in r.attrs]
    firsts = [r.attrs["data-thread"] for r in first.find_all(tag="tr") if "data-thread" in r.attrs]
    assert rows and not set(rows) & set(firsts)
    more = both.find(cls="next-hits")
    assert more is not None and "before=" in more.attrs["href"]


# --- the message blocks, built in Python ---------------------------------------------------------

#: The message blocks as the templates drew them (a Jinja macro per message).
REFERENCE_BLOCKS = Path(__file__).parent / "data" / "reference_message_blocks.html"
#: Text with what HTML escapes and what a page shows as escapes.
PAGE_TEXT = st.text(alphabet="ab <>&\"'\n\u202e\x1b\x85é", max_size=8)
COUNTS = st.sampled_from([0, 1, 1_234, 1_234_567])
MESSAGE_VIEWS = st.builds(
    pages.MessageView, st.integers(0, 10**6), PAGE_TEXT, PAGE_TEXT, PAGE_TEXT, COUNTS,
    st.lists(st.builds(pages.CallView, PAGE_TEXT, PAGE_TEXT, PAGE_TEXT, COUNTS, COUNTS),
             max_size=2),
    st.none() | PAGE_TEXT, PAGE_TEXT, COUNTS,
)
WORDS = st.lists(st.tuples(st.sampled_from(["same", "gone", "new"]), PAGE_TEXT), max_size=4)


def linked_under(root: str) -> Any:
    """The viewer's ``link`` under ``root``, as its pages make it."""
    def link(path: str, **params: Any) -> str:
        query = {k: v for k, v in params.items() if v is not None}
        return f"{root}{path}" + (f"?{urlencode(query)}" if query else "")

    return link


def reference_blocks(link: Any) -> Any:
    """The reference template's macros, ``message`` and ``changes``."""
    environment = jinja2.Environment(
        autoescape=True, undefined=jinja2.StrictUndefined, trim_blocks=True, lstrip_blocks=True
    )
    template = environment.from_string(REFERENCE_BLOCKS.read_text(encoding="utf-8"))
    return template.make_module({"link": link})


@st.composite
def change_views(draw: st.DrawFn) -> pages.ChangeView:
    kind = draw(st.sampled_from(["added", "removed", "modified"]))
    before = None if kind == "added" else draw(MESSAGE_VIEWS)
    after = None if kind == "removed" else draw(MESSAGE_VIEWS)
    return pages.ChangeView(
        kind, draw(PAGE_TEXT), before, after, draw(WORDS), draw(WORDS),
        draw(st.none() | PAGE_TEXT), draw(st.none() | PAGE_TEXT),
    )


@settings(max_examples=300)
@given(
    m=MESSAGE_VIEWS, run_id=st.none() | PAGE_TEXT, words=st.none() | WORDS,
    badge=st.none() | PAGE_TEXT, anchor=st.booleans(), found=PAGE_TEXT,
    root=st.sampled_from(["", "/under/a b&c"]),
)
def test_a_message_block_is_byte_for_byte_what_the_template_macro_drew(
    m: pages.MessageView, run_id: str | None, words: list[tuple[str, str]] | None,
    badge: str | None, anchor: bool, found: str, root: str,
) -> None:
    link = linked_under(root)
    expected = reference_blocks(link).message(m, "t<&>", run_id, words, badge, anchor, found)
    assert pages.message_html(link, m, "t<&>", run_id, words, badge, anchor, found) == expected


@settings(max_examples=100)
@given(changes=st.lists(change_views(), max_size=3), root=st.sampled_from(["", "/under"]))
def test_a_diff_sides_changes_are_byte_for_byte_what_the_template_drew(
    changes: list[pages.ChangeView], root: str
) -> None:
    link = linked_under(root)
    expected = reference_blocks(link).changes(changes, "t\u202e<&>")
    assert pages.changes_html(link, changes, "t\u202e<&>") == expected


def test_recorded_diffs_and_conversations_draw_their_messages_as_the_template_drew_them(
    store: agui_store.Store,
) -> None:
    """Real views: hostile text, a long message changed past where it is cut (each side
    linking to its run), word marks, tool calls and results, reasoning, an activity."""
    hostile = "a <b>bold</b> & \"quoted\" 'single' \u202eevil\u202c \x1b[31m \x85 end"
    long = "lorem " * 5000
    call = {"type": "TOOL_CALL_START", "toolCallId": "c1", "toolCallName": "get_\u202e",
            "parentMessageId": "a1"}
    store.append(one_run("t", "r0", said("u1", hostile, "user")))
    store.append(one_run("t", "r1", [
        call,
        {"type": "TOOL_CALL_ARGS", "toolCallId": "c1", "delta": '{"n": 1.10, "u": "\\u00fc"}'},
        {"type": "TOOL_CALL_END", "toolCallId": "c1"},
        {"type": "TOOL_CALL_RESULT", "messageId": "t1", "toolCallId": "c1",
         "content": json.dumps({"rows": ["x<&>" * 3] * 2000})},
        {"type": "REASONING_MESSAGE_START", "messageId": "re", "role": "reasoning"},
        {"type": "REASONING_MESSAGE_CONTENT", "messageId": "re", "delta": "hmm <&>"},
        {"type": "REASONING_MESSAGE_END", "messageId": "re"},
        *said("a2", long + "VERDICT: yes <b>")]), parent="r0")
    store.append(one_run("t", "r2", [{"type": "MESSAGES_SNAPSHOT", "messages": [
        {"id": "u1", "role": "user", "content": hostile.replace("bold", "brave")},
        {"id": "a2", "role": "assistant", "content": long + "VERDICT: no <i>"},
        {"id": "ac", "role": "activity", "activityType": "PLAN", "content": {"s": ["<b>"]}},
    ]}]), parent="r0")
    link = linked_under("/under")
    reference = reference_blocks(link)
    compared = linked = 0
    for a, b in (("r1", "r2"), ("r2", "r1"), ("r0", "r1")):
        for mode in ("three-dot", "two-dot"):
            for side in pages.diff_page(store, "t", a, b, mode=mode).sides:
                expected = reference.changes(side.changes, "t")
                assert pages.changes_html(link, side.changes, "t") == expected
                compared += len(side.changes)
                linked += sum(1 for v in side.changes if v.after and v.after.cut and v.after_run)
    for run, found in (("r1", ""), ("r1", "VERDICT"), ("r2", "brave")):
        page = pages.run_page(store, "t", run, found=found)
        for m in page.messages:
            expected = reference.message(m, "t", run, anchor=True, found=page.found)
            assert pages.message_html(link, m, "t", run, anchor=True, found=page.found) == expected
    assert compared > 10 and linked > 0


REFERENCE_EVENT_ROWS = Path(__file__).parent / "data" / "reference_event_rows.html"
#: An event type or what tells a row apart: what HTML escapes, and the marks a line breaks at.
NAMES = st.text(alphabet="aB_=<&\"'\u202e\x1b", max_size=8)
EVENT_ROWS = st.builds(
    pages.EventRow, st.integers(0, 10**6), NAMES, st.booleans(), NAMES, PAGE_TEXT, COUNTS,
    st.integers(1, 3), PAGE_TEXT, COUNTS,
)


def reference_event_rows(link: Any) -> Any:
    """The reference template's ``rows`` macro, its names marked as the viewer marked them."""
    def words_of(name: str) -> Markup:
        return Markup(escape(name)).replace("_", Markup("_<wbr>")).replace("=", Markup("=<wbr>"))

    environment = jinja2.Environment(
        autoescape=True, undefined=jinja2.StrictUndefined, trim_blocks=True, lstrip_blocks=True
    )
    template = environment.from_string(REFERENCE_EVENT_ROWS.read_text(encoding="utf-8"))
    return template.make_module({"link": link, "words_of": words_of})


@settings(max_examples=300)
@given(
    rows=st.lists(EVENT_ROWS, max_size=3), run_id=PAGE_TEXT,
    root=st.sampled_from(["", "/under/a b&c"]),
)
def test_a_runs_event_rows_are_byte_for_byte_what_the_template_loop_drew(
    rows: list[pages.EventRow], run_id: str, root: str
) -> None:
    link = linked_under(root)
    expected = reference_event_rows(link).rows(rows, "t<&>", run_id)
    assert pages.event_rows_html(link, rows, "t<&>", run_id) == expected


def test_a_recorded_runs_events_and_conversation_are_drawn_as_the_templates_drew_them(
    store: agui_store.Store,
) -> None:
    """Real rows: streamed deltas in one row and cut, an unknown type, an event cut with a
    link to the whole of it, hostile names; and the run's messages, each drawn as the macro
    drew it."""
    store.append(one_run("t", "r0", [
        {"type": "TOOL_CALL_START", "toolCallId": "c_1=", "toolCallName": "get_\u202e",
         "parentMessageId": "a1"},
        *[{"type": "TOOL_CALL_ARGS", "toolCallId": "c_1=", "delta": '{"n": 1}' * 300}] * 3,
        {"type": "TOOL_CALL_END", "toolCallId": "c_1="},
        {"type": "WEIRD_<EVENT>", "name": "x\u202e\x1b<y>"},
        {"type": "CUSTOM", "name": "n=1_a", "value": "v<&>" * 1000},
        *said("a_2", "a <b>bold</b> & \"quoted\" 'single'"),
    ]))
    link = linked_under("/under")
    page = pages.run_page(store, "t", "r0")
    assert {row.count > 1 and row.joined_left_out > 0 for row in page.events} == {False, True}
    assert any(not row.known for row in page.events) and any(row.left_out for row in page.events)
    expected = reference_event_rows(link).rows(page.events, "t", "r0")
    assert pages.event_rows_html(link, page.events, "t", "r0") == expected
    reference = reference_blocks(link)
    drawn = "".join(reference.message(m, "t", "r0", anchor=True, found="") for m in page.messages)
    assert pages.conversation_html(link, page.messages, "t", "r0", "") == drawn


def test_text_is_shown_as_it_came_unless_json_reads_it_whatever_it_starts_with() -> None:
    as_json = {" 1": "1", "\n\t{\"a\": [1]}": '{\n  "a": [\n    1\n  ]\n}', "NaN": "NaN",
               "-Infinity": "-Infinity", " true": "true", '"s"': '"s"', "null": "null"}
    for written, shown in as_json.items():
        json.loads(written)
        assert text.json_text(written) == shown
    for written in ["sunny, 21C", "", "  ", "tru", "\ufeff{}", "\u00a0[1]", "[1,", "ok [1]",
                    "Nope", "-", "{'a': 1}"]:
        with pytest.raises(ValueError):
            json.loads(written)
        assert text.json_text(written) == written


# --- unusual data ---------------------------------------------------------------------------------


def test_html_and_script_in_messages_ids_and_state_are_shown_as_text_never_as_markup(
    store: agui_store.Store,
) -> None:
    evil = '<script>window.pwned=1</script><img src=x onerror="window.pwned=2">'
    thread = "t<script>x</script>"
    store.append(one_run(thread, "r</script>", [
        *said("m<b>", evil, "user"),
        {"type": "STATE_SNAPSHOT", "snapshot": {"html": evil, "</script>": 1}},
    ]))
    client = client_of(store)
    for path, params in [("/", {}), ("/thread", {"thread": thread}),
                         ("/run", {"thread": thread, "run": "r</script>"}),
                         ("/run/changes", {"thread": thread, "run": "r</script>"}),
                         ("/fork", {"thread": thread, "run": "r</script>"}),
                         ("/diff", {"thread": thread, "a": "r</script>", "b": "r</script>"})]:
        html = client.get(url(path, **params)).text
        assert "<script>window" not in html and "<img src=x" not in html, path
        assert "<script>x" not in html and "r</script>" not in html, path
    page = get(client, "/run", thread=thread, run="r</script>")
    assert shown_messages(page)[0][2] == evil
    assert embedded_json(page, "state-data") == {"html": evil, "</script>": 1}


def test_a_title_shows_hidden_characters_as_escapes_and_data_for_scripts_keeps_them(
    store: agui_store.Store,
) -> None:
    thread, run = "t-\u202eevil", "r\u2066x\x1b[31m"
    store.append(one_run(thread, run, []))
    store.branch("side", run, thread_id=thread)
    client = client_of(store)
    listing, tree = get(client, "/"), get(client, "/thread", thread=thread)
    titles = [e.attrs["title"] for p in (listing, tree) for e in p.find_all()
              if "title" in e.attrs]
    assert "t-\\u202eevil" in titles and "→ r\\u2066x\\x1b[31m" in titles
    assert not [t for t in titles if any(c in t for c in "\u202e\u2066\x1b")]
    # What the page's script reads back stays as stored.
    assert [r.attrs["data-thread"] for r in listing.find_all(tag="tr")
            if "data-thread" in r.attrs] == [thread]
    assert [r.attrs["data-run"] for r in tree.find_all("run-row")] == [run]


def test_the_tree_rows_come_with_their_hidden_characters_shown_as_the_page_shows_text(
    store: agui_store.Store,
) -> None:
    # The page's check for hidden characters skips the rows, most of a long tree's page.
    thread, runs = "t-\u202eevil", ["r\u2066x\x1b[31m", "r2\x85<b>&\"'", "r3\u202e" + "x" * 40]
    for run in runs:
        store.append(one_run(thread, run, []))
    store.branch("side", runs[1], thread_id=thread)
    page = pages.tree_page(store, thread)
    rows = pages.tree_rows_html(page.rows, "/under\u202e", thread)
    assert text.on_page(rows) == rows
    tree = get(client_of(store), "/thread", thread=thread)
    assert [e.text for e in tree.find_all("run-id")] == [
        "r3\\u202e" + "x" * 36 + "… main",
        "r2\\x85<b>&\"' side",
        "r\\u2066x\\x1b[31m",
    ]
    assert [r.attrs["data-run"] for r in tree.find_all("run-row")] == runs[::-1]


def test_lone_surrogates_render_as_their_escapes(store: agui_store.Store) -> None:
    store.append(one_run("t", "r", [*said("m", "half an emoji: \ud83d!", "user"),
                                    {"type": "STATE_SNAPSHOT", "snapshot": {"k": "\udc00"}}]))
    client = client_of(store)
    page = get(client, "/run", thread="t", run="r")
    assert shown_messages(page)[0][2] == "half an emoji: \\ud83d!"
    assert embedded_json(page, "state-data") == {"k": "\udc00"}
    assert client.get(url("/run/message", thread="t", run="r", index="0")).status_code == 200
    assert client.get(url("/fork", thread="t", run="r")).status_code == 200


def test_a_four_megabyte_tool_result_is_cut_with_a_link_to_the_whole_message(
    store: agui_store.Store,
) -> None:
    result = "x" * (4 * 1024 * 1024)
    store.append(one_run("t", "r", [
        {"type": "TOOL_CALL_START", "toolCallId": "c", "toolCallName": "dump",
         "parentMessageId": "a"},
        {"type": "TOOL_CALL_END", "toolCallId": "c"},
        {"type": "TOOL_CALL_RESULT", "messageId": "res", "toolCallId": "c", "content": result},
    ]))
    client = client_of(store)
    response = client.get(url("/run", thread="t", run="r"))
    assert len(response.text) < 200_000
    page = parse(response.text)
    tool = next(m for m in page.find_all("msg") if "role-tool" in m.classes)
    clipped = tool.find("clipped")
    assert clipped is not None and f"{len(result) - text.INLINE_CHARS:,} more" in clipped.text
    whole = client.get(tool.find(tag="a").attrs["href"])  # type: ignore[union-attr]
    assert whole.json()["content"] == result
    event = [r for r in page.find_all("event", "tr") if r.attrs["data-type"] == "TOOL_CALL_RESULT"]
    link = event[0].find("clipped").find(tag="a")  # type: ignore[union-attr]
    assert client.get(link.attrs["href"]).json()["content"] == result  # type: ignore[union-attr]


def test_a_json_tool_result_is_shown_indented_with_its_escapes_read_as_arguments_are(
    store: agui_store.Store,
) -> None:
    weather = '{"city":"Z\\u00fcrich gr\\u00fc\\u00dft","note":"<b>warm</b>\\nsunny"}'
    store.append(one_run("t", "r", said("u", "weather?", "user")
                         + called("c1", "weather", weather, weather)
                         + called("c2", "say", "{}", "sunny, 21\\u00b0C <b>")))
    page = get(client_of(store), "/run", thread="t", run="r")
    (args, _) = page.find_all(cls="args")
    results = [m.find(cls="msg-text") for m in page.find_all("msg") if "role-tool" in m.classes]
    shown = [r.text for r in results if r is not None]
    indented = '{\n  "city": "Zürich grüßt",\n  "note": "<b>warm</b>\\nsunny"\n}'
    assert args.text == indented
    assert shown == [indented, "sunny, 21\\u00b0C <b>"]  # not JSON: as it came


def test_tool_json_is_shown_with_its_numbers_and_keys_as_the_producer_wrote_them(
    store: agui_store.Store,
) -> None:
    written = '{"price":1.10,"big":1e400,"pi":0.12345678901234567890,"n":1E5,"n":-0}'
    store.append(one_run("t", "r", said("u", "price?", "user")
                         + called("c1", "quote", written, written)))
    page = get(client_of(store), "/run", thread="t", run="r")
    (args,) = page.find_all(cls="args")
    results = [m.find(cls="msg-text") for m in page.find_all("msg") if "role-tool" in m.classes]
    indented = (
        '{\n  "price": 1.10,\n  "big": 1e400,\n  "pi": 0.12345678901234567890,\n'
        '  "n": 1E5,\n  "n": -0\n}'
    )
    assert args.text == indented
    assert [r.text for r in results if r is not None] == [indented]


JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(), inner, max_size=4),
    max_leaves=12,
)


@given(JSON_VALUES, st.sampled_from([(", ", ": "), (",", ":"), (" , ", " :  ")]), st.booleans())
def test_tool_json_is_laid_out_as_json_dumps_lays_out_what_it_reads(
    value: Any, separators: tuple[str, str], ascii_only: bool
) -> None:
    """Where a number's spelling is the one Python writes, the layout of JSON as written is
    json.dumps(indent=2)'s, whatever white space and escapes the producer used."""
    written = json.dumps(value, separators=separators, ensure_ascii=ascii_only)
    assert text.json_text(written) == text.dumps(value, indent=2)


def test_tool_call_arguments_nested_deeper_than_json_is_read_are_shown_as_they_came(
    store: agui_store.Store,
) -> None:
    deep = "[" * 100_000 + "]" * 100_000
    store.append(one_run("t", "r", said("u", "nest it", "user") + called("c", "nest", deep, "ok")))
    response = client_of(store).get(url("/run", thread="t", run="r"))
    assert response.status_code == 200
    (args,) = parse(response.text).find_all(cls="args")
    assert args.text == "[" * text.INLINE_CHARS


def test_a_tool_calls_arguments_cut_on_the_page_link_to_the_whole_message(
    store: agui_store.Store,
) -> None:
    arguments = '{"blob": "' + "y" * (text.INLINE_CHARS + 500) + '"}'
    store.append(one_run("t", "r", [
        {"type": "TOOL_CALL_START", "toolCallId": "c", "toolCallName": "upload",
         "parentMessageId": "a"},
        {"type": "TOOL_CALL_ARGS", "toolCallId": "c", "delta": arguments},
        {"type": "TOOL_CALL_END", "toolCallId": "c"},
    ]))
    client = client_of(store)
    page = get(client, "/run", thread="t", run="r")
    call = page.find("call")
    assert call is not None
    clipped = call.find("clipped")
    assert clipped is not None and "more characters of arguments" in clipped.text
    whole = client.get(clipped.find(tag="a").attrs["href"])  # type: ignore[union-attr]
    assert whole.json()["toolCalls"][0]["function"]["arguments"] == arguments


def test_the_fork_pages_snippets_name_the_store_by_its_absolute_path(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A snippet is pasted elsewhere: ``chat.db`` there names another file."""
    monkeypatch.chdir(tmp_path)
    with agui_store.open("chat.db") as store:
        store.append(one_run("t", "r", said("u", "hello", "user")))
        shown = get(client_of(store), "/fork", thread="t", run="r").text
    assert f"agui_store.open({str(tmp_path / 'chat.db')!r})" in shown
    assert f"--db {tmp_path / 'chat.db'}" in shown and "open('chat.db')" not in shown


def test_the_fork_pages_command_line_gives_the_shell_back_ids_with_control_characters(
    store: agui_store.Store,
) -> None:
    """The page shows such a character as its escape; the shell must read the escape back
    as the character (ANSI-C quotes), not as the backslash and letters."""
    thread, run = "t-\u202eevil\u202c", "r\x1b[31m1\n"
    store.append(one_run(thread, run, said("u", "hello", "user")))
    snippet = get(client_of(store), "/fork", thread=thread, run=run).by_id("http-call")
    assert snippet is not None
    line = snippet.text.splitlines()[0].removesuffix(" > fork.json")
    assert "\x1b" not in line and "\u202e" not in line  # shown as escapes
    words = subprocess.run(
        ["bash", "-c", 'printf "%s\\0" ' + line], capture_output=True, text=True, check=True
    ).stdout.split("\0")[:-1]
    assert words == ["agui-store", "fork", run, "--thread", thread, "--db", store.path]


def test_the_fork_pages_command_line_runs_for_ids_that_begin_with_a_dash(
    store: agui_store.Store,
) -> None:
    """argparse takes a word that begins with ``-`` for an option: the command gives such a
    thread as ``--thread=-t`` and such a run after ``--``, as the command line's own
    commands to paste do."""
    thread, run = "-t", "-r"
    store.append(one_run(thread, run, said("u", "hello", "user")))
    snippet = get(client_of(store), "/fork", thread=thread, run=run).by_id("http-call")
    assert snippet is not None
    line = snippet.text.splitlines()[0].removesuffix(" > fork.json")
    words = subprocess.run(
        ["bash", "-c", 'printf "%s\\0" ' + line], capture_output=True, text=True, check=True
    ).stdout.split("\0")[:-1]
    assert words[:2] == ["agui-store", "fork"]
    done = subprocess.run(
        [sys.executable, "-m", "agui_store", *words[1:]], capture_output=True, text=True,
        env={**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[1])},
    )
    assert done.returncode == 0, done.stderr
    body = json.loads(done.stdout)
    expected = store.fork(run, thread_id=thread)
    assert body["threadId"] == thread
    assert body["messages"] == json.loads(text.dumps(expected["messages"]))


def test_a_deep_state_is_embedded_whole_for_the_tree_view(tmp_path: Path) -> None:
    deep: Any = "bottom"
    for _ in range(300):
        deep = {"d": deep}
    with agui_store.open(tmp_path / "s.db", max_depth=512) as store:
        store.append(one_run("t", "r", [{"type": "STATE_SNAPSHOT", "snapshot": deep}]))
        page = get(client_of(store), "/run", thread="t", run="r")
        assert embedded_json(page, "state-data") == deep


def test_an_unknown_event_type_is_listed_and_marked_unknown(store: agui_store.Store) -> None:
    store.append(one_run("t", "r", [{"type": "VENDOR_THING", "payload": [1, 2]}]))
    page = get(client_of(store), "/run", thread="t", run="r")
    row = [r for r in page.find_all("event", "tr") if r.attrs["data-type"] == "VENDOR_THING"]
    assert len(row) == 1 and "unknown" in row[0].classes
    assert row[0].find("badge-unknown") is not None


def test_every_event_type_of_ag_ui_1_0_is_known_to_the_run_page(
    store: agui_store.Store,
) -> None:
    subagent = [
        {"type": "SUBAGENT_STARTED", "subagentRunId": "s1", "name": "researcher"},
        {"type": "SUBAGENT_ERROR", "subagentRunId": "s1", "message": "no sources"},
        {"type": "SUBAGENT_STARTED", "subagentRunId": "s2", "name": "writer"},
        {"type": "SUBAGENT_FINISHED", "subagentRunId": "s2", "result": {"ok": True}},
    ]
    store.append(one_run("t", "r", subagent))
    page = get(client_of(store), "/run", thread="t", run="r")
    rows = [r for r in page.find_all("event", "tr") if r.attrs["data-type"].startswith("SUB")]
    assert len(rows) == 4
    assert all("unknown" not in r.classes and r.find("badge-unknown") is None for r in rows)
    assert len(agui_store.EVENT_TYPES) == 31 and "SUBAGENT_ERROR" in agui_store.EVENT_TYPES


def test_a_live_runs_page_carries_the_token_its_poll_answers_and_the_view_it_was_asked_for(
    store: agui_store.Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(pages, "MESSAGES_SHOWN", 1)
    store.append([started("t", "r"), *said("m1", "one"), *said("m2", "two")])
    client = client_of(store)
    poll = url("/run/poll", thread="t", run="r")
    page = get(client, "/run", thread="t", run="r", all_events="1")
    head = page.by_id("run")
    assert head is not None
    # The page polls from the run as it rendered it: nothing it shows is read twice.
    assert head.attrs["data-token"] == client.get(poll).json()["token"]
    assert head.attrs["data-page"] == url("/run", thread="t", run="r", all_events="1")
    earlier = page.find(cls="earlier")
    show_all = earlier.find(tag="a") if earlier is not None else None
    assert show_all is not None and show_all.attrs["href"] == url(
        "/run", thread="t", run="r", all_events="1", all_messages="1"
    )
    store.append(said("m3", "three"), thread_id="t", run_id="r")
    assert client.get(poll).json()["token"] != head.attrs["data-token"]


# --- scope, writes and mounting ----------------------------------------------------------------


def test_a_switch_in_a_link_is_on_at_1_and_off_at_0_and_any_other_value_is_refused(
    store: agui_store.Store,
) -> None:
    body = [e for i in range(pages.MESSAGES_SHOWN + 5) for e in said(f"m{i}", f"line {i}")]
    store.append(one_run("t", "r", body))
    client = client_of(store)
    for off in ("0", ""):
        assert len(shown_messages(get(client, "/run", thread="t", run="r", all_messages=off))) \
            == pages.MESSAGES_SHOWN
        assert get(client, "/thread", thread="t", rows=off).find(tag="h1") is not None
    assert len(shown_messages(get(client, "/run", thread="t", run="r", all_messages="1"))) \
        == pages.MESSAGES_SHOWN + 5
    assert get(client, "/thread", thread="t", rows="1").find(tag="h1") is None
    refused = get(client, "/run", 400, thread="t", run="r", all_events="yes")
    assert "all_events= is 1 (on) or 0 (off)" in refused.text


def test_the_viewer_refuses_a_store_scope_title_or_flag_it_cannot_take_naming_it(
    store: agui_store.Store, tmp_path: Path
) -> None:
    astore = agui_store.aio.AsyncStore(store, writer="thread")
    wrong_type: list[tuple[dict[str, Any], str]] = [
        ({"store": None}, "store="),
        ({"store": str(tmp_path / "ui.db")}, "agui_store.open"),
        ({"store": astore}, ".store"),
        ({"store": store, "scope": 7}, "scope"),
        ({"store": store, "title": 7}, "title="),
        ({"store": store, "allow_writes": "no"}, "allow_writes="),
    ]
    for arguments, named in wrong_type:
        store_given = arguments.pop("store")
        with pytest.raises(ArgumentTypeError, match=re.escape(named)):
            agui_store.ui.app(store_given, **arguments)
    asyncio.run(astore.close())
    with pytest.raises(agui_store.InvalidArgumentError, match="scope") as refused:
        agui_store.ui.app(store, scope="")
    assert not isinstance(refused.value, TypeError)


def test_with_a_scope_another_owners_thread_is_a_404_on_every_page(
    store: agui_store.Store,
) -> None:
    store.append(one_run("mine", "m1", said("u", "mine", "user")), scope="alice")
    store.append(one_run("theirs", "b1", said("u", "secret", "user")), scope="bob")
    client = client_of(store, scope="alice")
    listed = [r.attrs["data-thread"] for r in get(client, "/").find_all(tag="tr")
              if "data-thread" in r.attrs]
    assert listed == ["mine"]
    assert get(client, "/", q="secret").find("thread-link") is None
    for path, params in [("/thread", {"thread": "theirs"}), ("/thread/poll", {"thread": "theirs"}),
                         ("/run", {"thread": "theirs", "run": "b1"}),
                         ("/run/poll", {"thread": "theirs", "run": "b1"}),
                         ("/run/changes", {"thread": "theirs", "run": "b1"}),
                         ("/run/input", {"thread": "theirs", "run": "b1"}),
                         ("/run/message", {"thread": "theirs", "run": "b1", "index": "0"}),
                         ("/run/event", {"thread": "theirs", "run": "b1", "index": "0"}),
                         ("/diff", {"thread": "theirs", "a": "b1", "b": "b1"}),
                         ("/fork", {"thread": "theirs", "run": "b1"}),
                         ("/fork.json", {"thread": "theirs", "run": "b1"})]:
        response = client.get(url(path, **params))
        assert response.status_code == 404, path
        assert "secret" not in response.text
        # The server's store is the app's business, not the owner's: no page names it.
        assert "ui.db" not in response.text, path
    for path, params in [("/", {}), ("/thread", {"thread": "mine"}),
                         ("/run", {"thread": "mine", "run": "m1"}),
                         ("/fork", {"thread": "mine", "run": "m1"})]:
        shown = client.get(url(path, **params))
        assert shown.status_code == 200 and "ui.db" not in shown.text, path


def test_a_scoped_viewer_counts_the_owners_threads_as_theirs_not_the_stores(
    store: agui_store.Store,
) -> None:
    client = client_of(store, scope="alice")
    empty = get(client, "/").find("empty")
    assert empty is not None and empty.text == "Owner 'alice' has no threads yet."
    store.append(one_run("mine", "m1", said("u", "porto", "user")), scope="alice")
    store.append(one_run("theirs", "b1", said("u", "porto", "user")), scope="bob")
    store.append(one_run("nobodys", "n1", said("u", "porto", "user")))

    def counted(page: Element) -> str:
        pager = page.find("pager")
        assert pager is not None
        return " ".join(pager.text.split())

    assert counted(get(client, "/")) == "1 thread of owner 'alice'"
    assert counted(get(client, "/", q="porto")).startswith("1 thread of owner 'alice'; ")
    store.append(one_run("mine too", "m2", said("u", "porto", "user")), scope="alice")
    assert counted(get(client, "/")) == "2 threads of owner 'alice'"
    assert counted(get(client_of(store), "/")) == "4 threads in the store"
    other = client_of(store, scope="<b>bob</b>")
    assert "Owner '<b>bob</b>' has no threads yet." in get(other, "/").text


def test_a_page_the_viewer_does_not_have_names_the_path_and_links_to_the_threads(
    store: agui_store.Store,
) -> None:
    client = client_of(store)
    for path in ["/foo", "/run/nothing", "/static/nothing.css"]:
        page = get(client, path, 404)
        assert page.find(tag="h1").text == "Not found"  # type: ignore[union-attr]
        message = page.find("error-message")
        assert message is not None and message.text == f"no page at {path}"
        assert [a.attrs["href"] for a in page.find_all(tag="a") if a.text == "All threads"] == ["/"]
    assert client.head("/foo").status_code == 404
    hostile = "/<script>alert(1)</script>" + "x" * 10_000
    response = client.get(hostile)
    assert response.status_code == 404
    assert "<script>alert" not in response.text and "x" * 200 not in response.text
    message = parse(response.text).find("error-message")
    assert message is not None
    assert message.text.startswith("no page at /<script>alert(1)</script>xx")
    assert message.text.endswith("…") and len(message.text) < 120
    under_a_root = TestClient(Starlette(routes=[Mount("/viewer", agui_store.ui.app(store))]))
    message = get(under_a_root, "/viewer/foo", 404).find("error-message")
    assert message is not None and message.text == "no page at /viewer/foo"


def test_a_page_asked_with_a_method_it_does_not_take_says_which_it_takes(
    store: agui_store.Store,
) -> None:
    client = client_of(store)
    posted = client.post("/thread")
    assert posted.status_code == 405 and set(posted.headers["allow"].split(", ")) == {"GET", "HEAD"}
    message = parse(posted.text).find("error-message")
    assert message is not None and message.text == "/thread takes GET, HEAD, not POST"
    fetched = client.get("/branch")
    assert fetched.status_code == 405 and fetched.headers["allow"] == "POST"
    assert fetched.json() == {"error": "/branch takes POST, not GET"}
    # A stylesheet posted to: the page's own links go from the viewer's root, as every page's.
    page = parse(client.post("/static/viewer.css").text)
    assert [a.attrs["href"] for a in page.find_all(tag="a") if a.text == "All threads"] == ["/"]
    assert "/static/static" not in client.post("/static/viewer.css").text


def test_a_scoped_viewer_says_the_store_for_its_path_alone_not_inside_a_word(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    with agui_store.open("db") as short_named:  # a path that is also part of ids
        short_named.append(one_run("mydb", "db1", said("u", "mine", "user")), scope="alice")
        short_named.append(one_run("dbx", "x1", said("u", "theirs", "user")), scope="bob")
        gone = get(client_of(short_named, scope="alice"), "/thread", 404, thread="dbx")
        assert "no thread 'dbx' in the store" in gone.text


@pytest.mark.parametrize(
    "at", ["999999999999999999", "-999999999999999999", "253402300800000"]  # past 9999-12-31
)
def test_a_threads_page_link_whose_time_no_calendar_date_holds_is_refused_saying_so(
    store: agui_store.Store, at: str
) -> None:
    for i in range(3):
        store.append(one_run(f"t{i}", "r", said("u", "hello", "user")))
    response = client_of(store).get(url("/", before="t1", at=at))
    assert response.status_code == 400
    message = parse(response.text).find("error-message")
    assert message is not None and "at=" in message.text and at in message.text


@pytest.mark.parametrize(("path", "params", "name"), [
    ("/", {"after": "9" * 25}, "after"),
    ("/", {"before": "t1", "at": "9" * 25}, "at"),
    ("/run/message", {"thread": "t0", "run": "r", "index": "9" * 25}, "index"),
    ("/run/event", {"thread": "t0", "run": "r", "index": "-" + "9" * 25}, "index"),
])
def test_a_number_in_a_link_too_long_to_be_one_is_refused_naming_its_parameter(
    store: agui_store.Store, path: str, params: dict[str, str], name: str
) -> None:
    for i in range(3):
        store.append(one_run(f"t{i}", "r", said("u", "hello", "user")))
    response = client_of(store).get(url(path, **params))
    assert response.status_code == 400
    if path == "/":
        message = parse(response.text).find("error-message")
        assert message is not None
        shown = message.text
    else:
        shown = response.json()["error"]
    assert shown == f"{name}= is a whole number of at most 18 ASCII digits, not {params[name]!r}"


def test_the_json_endpoints_answer_an_error_as_json_and_a_position_in_ascii_digits_only(
    store: agui_store.Store,
) -> None:
    store.append(one_run("t", "r", said("u", "hello", "user")))
    client = client_of(store)
    for path, params, status in [
        ("/run/message", {"thread": "t", "run": "nope", "index": "0"}, 404),
        ("/run/event", {"thread": "t", "run": "r", "index": "99"}, 404),
        ("/run/input", {"thread": "nope", "run": "r"}, 404),
        ("/fork.json", {"thread": "t", "run": "nope"}, 404),
        ("/run/message", {"thread": "t", "run": "r", "index": "x"}, 400),
    ]:
        response = client.get(url(path, **params))
        assert response.status_code == status, (path, params)
        assert response.headers["content-type"].startswith("application/json")
        assert set(response.json()) == {"error"}
    for digits in ("\u0663", "\uff11", " 1", "1_0"):  # Arabic-Indic, fullwidth, spaced, split
        response = client.get(url("/run/message", thread="t", run="r", index=digits))
        assert response.status_code == 400
        assert response.json()["error"] == (
            f"index= is a whole number of at most 18 ASCII digits, not {digits!r}"
        )
    assert client.get(url("/run/message", thread="t", run="r", index="0")).status_code == 200


@pytest.mark.parametrize(
    "run_id",
    ["plain-1", "\u56de\u7b54-1", "run \U0001f389", "x\r\nSet-Cookie: a", 'a"; filename="evil.sh'],
)
def test_a_fork_download_is_named_after_its_run_whatever_the_run_id_holds(
    store: agui_store.Store, run_id: str
) -> None:
    store.append(one_run("t", run_id, said("u", "hello", "user")))
    response = client_of(store).get(url("/fork.json", thread="t", run=run_id))
    assert response.status_code == 200
    header = response.headers["content-disposition"]
    assert header.isascii() and "\r" not in header and "\n" not in header
    disposition = email.message.Message()
    disposition["content-disposition"] = header
    kind, plain, extended = disposition.get_params(header="content-disposition")
    assert kind == ("attachment", "")
    assert plain[0] == "filename" and re.fullmatch(r"fork-[A-Za-z0-9._-]+\.json", plain[1])
    assert isinstance(extended[1], tuple)  # RFC 2231's charset'language'value, as browsers read
    assert email.utils.collapse_rfc2231_value(extended[1]) == f"fork-{run_id}.json"
    assert response.json()["threadId"] == "t"


def test_a_run_prefix_naming_several_runs_says_so_and_is_not_a_missing_page(
    store: agui_store.Store,
) -> None:
    store.append(one_run("t", "run-a", said("u", "one", "user")))
    store.append(one_run("t", "run-b", said("u2", "two", "user")))
    client = client_of(store)
    response = client.get(url("/run", thread="t", run="run-"))
    assert response.status_code == 400
    page = parse(response.text)
    heading = page.find(tag="h1")
    assert heading is not None and heading.text == "Cannot show this"
    assert "run-a" in response.text and "run-b" in response.text
    assert client.get(url("/run", thread="t", run="zzz")).status_code == 404


def post_branch(client: TestClient, origin: str | None, **body: str) -> Any:
    headers = {"Origin": origin} if origin else {}
    return client.post("/branch", json=body, headers=headers)


def test_the_viewer_writes_nothing_unless_allowed_and_then_only_branches_from_its_own_pages(
    store: agui_store.Store,
) -> None:
    store.append(one_run("t", "r0", []))
    store.append(one_run("t", "r1", []))
    read_only = client_of(store)
    own = "http://testserver"
    assert post_branch(read_only, own, thread="t", name="x", run="r0").status_code == 403
    writer = client_of(store, allow_writes=True)
    assert post_branch(writer, None, thread="t", name="x", run="r0").status_code == 403
    assert post_branch(writer, "http://evil.example", thread="t", name="x",
                       run="r0").status_code == 403
    assert [b.name for b in store.branches("t")] == ["main"]
    made = post_branch(writer, own, thread="t", name="retry", run="r0")
    assert made.status_code == 200 and made.json()["runId"] == "r0"
    moved = post_branch(writer, own, thread="t", name="retry", run="r1")
    assert moved.json()["runId"] == "r1"
    assert {b.name: b.run_id for b in store.branches("t")} == {"main": "r1", "retry": "r1"}
    assert post_branch(writer, own, thread="t", name="bad name~", run="r1").status_code == 400
    assert post_branch(writer, own, thread="t", name="x", run="nope").status_code == 404


def test_mounted_under_a_path_every_link_stays_under_it(store: agui_store.Store) -> None:
    store.append(one_run("t", "r0", said("u", "hi", "user")))
    outer = Starlette(routes=[Mount("/history", app=agui_store.ui.app(store))])
    client = TestClient(outer)
    page = get(client, "/history/thread", thread="t")
    hrefs = [a.attrs["href"] for a in page.find_all(tag="a")]
    assert hrefs and all(h.startswith("/history/") for h in hrefs)
    css = [link.attrs["href"] for link in page.find_all(tag="link") if "stylesheet" in
           link.attrs.get("rel", "")]
    assert client.get(css[0]).status_code == 200
    for h in hrefs:
        assert client.get(h).status_code == 200, h


def test_the_ui_command_without_its_extra_says_how_to_install_it(tmp_path: Path) -> None:
    db = tmp_path / "s.db"
    with agui_store.open(db) as store:
        store.append(one_run("t", "r", []))
    # The extra's packages made unimportable, as in an install without [ui].
    code = ("import sys; sys.modules['starlette'] = None; sys.modules['jinja2'] = None; "
            "from agui_store.cli import main; sys.exit(main(sys.argv[1:]))")
    env = {k: v for k, v in os.environ.items() if k != "AGUI_STORE_DB"}
    proc = subprocess.run([sys.executable, "-c", code, "ui", str(db), "--no-browser"],
                          capture_output=True, text=True, env=env, timeout=60)
    assert proc.returncode == 1
    assert "pip install 'agui-store[ui]'" in proc.stderr and "Traceback" not in proc.stderr
    assert proc.stderr.count("\n") == 1


@pytest.mark.parametrize(
    ("options", "code", "says"),
    [
        (["--port", "99999"], 2, "expected an integer from 0 to 65,535"),
        (["--host", "", "--port", "0"], 2, "not an empty string"),
        (["--host", "no-such-host.invalid", "--port", "0"], 1, "pass another --host"),
        (["--host", "192.0.2.1", "--port", "0"], 1, "pass another --host"),  # not ours
        (["--thread", "nope", "--port", "0"], 1, "no thread 'nope'"),
    ],
)
def test_the_ui_command_refuses_what_it_cannot_serve_before_serving(
    tmp_path: Path, options: list[str], code: int, says: str
) -> None:
    db = tmp_path / "s.db"
    with agui_store.open(db) as store:
        store.append(one_run("t", "r", []))
    env = {k: v for k, v in os.environ.items() if k != "AGUI_STORE_DB"}
    proc = subprocess.run(
        [sys.executable, "-m", "agui_store", "ui", str(db), "--no-browser", *options],
        capture_output=True, text=True, env=env, timeout=60,
    )
    assert proc.returncode == code, proc.stderr
    assert says in proc.stderr and proc.stderr.count("\n") == 1 and "Traceback" not in proc.stderr


def test_importing_agui_store_does_not_import_the_viewers_libraries() -> None:
    code = ("import sys, agui_store, agui_store.cli; "
            "print(sorted(m for m in ('starlette', 'jinja2', 'uvicorn') if m in sys.modules))")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=60, check=True)
    assert proc.stdout.strip() == "[]"


def test_the_templates_and_assets_ship_inside_the_package() -> None:
    from importlib import resources

    root = resources.files("agui_store.ui")
    for name in ("static/viewer.js", "static/viewer.css", "templates/base.html"):
        assert (root / name).is_file(), name
    pyproject = (Path(__file__).resolve().parents[1] / "pyproject.toml").read_text()
    assert '"agui_store.ui" = ["templates/*.html", "static/*"]' in pyproject


def test_in_a_notebook_one_call_shows_a_threads_tree_inline(store: agui_store.Store) -> None:
    import httpx

    store.append(one_run("t", "r0", said("u", "hi", "user")))
    shown = agui_store.ui.show(store, "t", height=500)
    html = shown._repr_html_()
    assert html.startswith("<iframe ") and 'height="500"' in html
    page = parse(httpx.get(shown.url, timeout=30).text)
    assert [r.attrs["data-run"] for r in page.find_all("run-row")] == ["r0"]
    assert agui_store.ui.show(store, "t").url == shown.url  # one server per store


def test_importing_the_viewer_without_its_extra_names_the_extra() -> None:
    code = ("import sys; sys.modules['starlette'] = None\n"
            "try:\n    import agui_store.ui\nexcept ImportError as e:\n    print(e)")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=60, check=True)
    assert "pip install 'agui-store[ui]'" in proc.stdout


class UiCommand:
    """``agui-store ui DB --port 0 --no-browser OPTIONS`` in a process of its own while the
    block runs (``line``: what it printed first, ``base``: its URL), stopped with Ctrl+C
    after it (``returncode``, ``out`` and ``err`` then)."""

    def __init__(self, db: Path, *options: str) -> None:
        self.argv = [sys.executable, "-m", "agui_store", "ui", str(db), "--port", "0",
                     "--no-browser", *options]
        self.out = self.err = ""
        self.returncode: int | None = None

    def __enter__(self) -> UiCommand:
        env = {k: v for k, v in os.environ.items() if k != "AGUI_STORE_DB"}
        self.proc = subprocess.Popen(self.argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                     text=True, env=env)
        assert self.proc.stdout is not None
        self.line = self.proc.stdout.readline()
        self.address = self.line.split(" at ", 1)[1].split(" ", 1)[0]
        self.base = self.address.split("/thread")[0].rstrip("/")
        return self

    def __exit__(self, *exc: object) -> None:
        import signal

        self.proc.send_signal(signal.SIGINT)
        self.out, self.err = self.proc.communicate(timeout=60)
        self.returncode = self.proc.returncode


def test_the_ui_command_serves_the_store_until_interrupted(tmp_path: Path) -> None:
    import httpx

    db = tmp_path / "s.db"
    with agui_store.open(db) as store:
        store.append(one_run("t/1", "r0", said("u", "hello", "user")))
    with UiCommand(db, "--thread", "t/1") as ui:
        line = ui.line
        assert line.startswith(f"viewer of {db} at http://127.0.0.1:") and "read-only" in line
        assert ui.address.endswith("/thread?thread=t%2F1")
        page = parse(httpx.get(ui.address, timeout=30).text)
        assert [r.attrs["data-run"] for r in page.find_all("run-row")] == ["r0"]
        assert httpx.post(ui.base + "/branch", json={}, timeout=30).status_code == 403
    assert ui.returncode == 0, ui.err
    assert ui.out.strip().endswith("viewer stopped") and "Traceback" not in ui.err


def test_the_served_viewer_refuses_a_request_for_another_host_as_dns_rebinding_sends_it(
    tmp_path: Path,
) -> None:
    """A page of another site that points its own name at 127.0.0.1 makes same-origin
    requests to the viewer, with its name in ``Host``: they read nothing and write nothing,
    while the names of this machine's loopback interface are served."""
    import httpx

    db = tmp_path / "s.db"
    with agui_store.open(db) as store:
        store.append(one_run("t", "r0", said("u", "the secret", "user")))
    with UiCommand(db, "--allow-writes") as ui:
        base = ui.base
        port = base.rsplit(":", 1)[1]
        page = f"{base}/run?thread=t&run=r0"
        for host in (f"attacker.example:{port}", "attacker.example", f"127.0.0.1.nip.io:{port}"):
            refused = httpx.get(page, headers={"Host": host}, timeout=30)
            assert refused.status_code == 421, host
            assert "the secret" not in refused.text and "answers requests to" in refused.text
        rebound = f"attacker.example:{port}"
        written = httpx.post(
            f"{base}/branch", json={"thread": "t", "name": "rebound", "run": "r0"},
            headers={"Host": rebound, "Origin": f"http://{rebound}"}, timeout=30,
        )
        assert written.status_code == 421
        for host in (f"127.0.0.1:{port}", f"localhost:{port}", f"LOCALHOST.:{port}"):
            served = httpx.get(page, headers={"Host": host}, timeout=30)
            assert served.status_code == 200 and "the secret" in served.text, host
    with agui_store.open(db) as store:
        assert [b.name for b in store.branches("t") if not b.default] == []


def test_a_run_that_left_the_state_alone_says_so_instead_of_an_empty_patch(
    store: agui_store.Store,
) -> None:
    store.append(one_run("t", "r0", [{"type": "STATE_SNAPSHOT", "snapshot": {"n": 1}}]))
    store.append(one_run("t", "r1", said("a1", "no state change")), parent="r0")
    page = get(client_of(store), "/run/changes", thread="t", run="r1")
    assert page.find("patch") is None
    assert "The state did not change." in page.text


def test_a_failed_runs_page_shows_its_errors_message_and_code_beside_its_status(
    store: agui_store.Store,
) -> None:
    store.append([started("t", "r0"), *said("a0", "working on it"),
                  {"type": "RUN_ERROR", "message": "the model <timed> out", "code": "E_TIMEOUT"}])
    store.append([started("t", "r1"), {"type": "RUN_ERROR", "message": "no code sent"}],
                 parent="r0")
    store.append(one_run("t", "r2", said("a2", "fine")), parent="r1")
    # A RUN_ERROR after RUN_FINISHED is the one that counts, as for the run's status.
    store.append([*one_run("t", "r3", said("a3", "done")),
                  {"type": "RUN_ERROR", "message": "late", "code": "E_LATE"}], parent="r2")
    client = client_of(store)
    failed = get(client, "/run", thread="t", run="r0").find("run-error")
    assert failed is not None
    assert failed.find("error-message").text == "the model <timed> out"  # type: ignore[union-attr]
    assert failed.find("error-code").text == "E_TIMEOUT"  # type: ignore[union-attr]
    without_code = get(client, "/run", thread="t", run="r1").find("run-error")
    assert without_code is not None and without_code.find("error-code") is None
    assert without_code.find("error-message").text == "no code sent"  # type: ignore[union-attr]
    assert get(client, "/run", thread="t", run="r2").find("run-error") is None
    late = get(client, "/run", thread="t", run="r3").find("run-error")
    assert late is not None and late.find("error-code").text == "E_LATE"  # type: ignore[union-attr]


def test_an_error_page_about_a_thread_links_back_to_it_when_the_store_holds_it(
    store: agui_store.Store,
) -> None:
    store.append(one_run("t/1", "r0", said("a0", "hello")))
    store.append(one_run("theirs", "b1", said("u", "secret", "user")), scope="bob")
    client = client_of(store)
    for path, params, status in [
        ("/run", {"thread": "t/1", "run": "no-such-run"}, 404),
        ("/diff", {"thread": "t/1", "a": "r0", "b": "no-such-branch"}, 404),
        ("/fork", {"thread": "t/1", "run": "no-such-run"}, 404),
        ("/run", {"thread": "t/1"}, 400),
        ("/diff", {"thread": "t/1", "a": "r0", "b": "r0", "mode": "four-dot"}, 400),
    ]:
        page = get(client, path, status, **params)
        back = page.find("back-to-thread", "a")
        assert back is not None, (path, params)
        assert back.attrs["href"] == url("/thread", thread="t/1")
        assert url("/") in [a.attrs["href"] for a in page.find_all(tag="a")]
    # A thread the store does not hold, or holds for another owner, gets no link.
    assert get(client, "/run", 404, thread="gone", run="r0").find("back-to-thread") is None
    scoped = client_of(store, scope="alice")
    assert get(scoped, "/run", 404, thread="theirs", run="b1").find("back-to-thread") is None


def test_a_diff_of_a_revision_the_thread_lacks_keeps_the_compare_form_to_mend_it(
    store: agui_store.Store,
) -> None:
    store.append(one_run("t", "r0", said("a0", "hello")))
    store.branch("porto", "r0", thread_id="t")
    client = client_of(store)
    page = get(client, "/diff", 404, thread="t", a="porto", b="prto", mode="two-dot")
    form = page.find("compare", "form")
    assert form is not None  # the page is the form with its error, not a dead end
    fields = {i.attrs.get("name"): i.attrs.get("value") for i in form.find_all(tag="input")}
    assert fields == {"thread": "t", "a": "porto", "b": "prto"}
    options = form.find_all(tag="option")
    assert [o.attrs.get("value") for o in options if "selected" in o.attrs] == ["two-dot"]
    assert options[-1].attrs.get("value") == "porto"  # the thread's branches, offered
    assert "prto" in (page.find("error-message") or page).text
    # Not on other pages' errors, nor for a thread the store does not hold.
    assert get(client, "/run", 404, thread="t", run="nope").find("compare", "form") is None
    assert get(client, "/diff", 404, thread="gone", a="x", b="y").find("compare", "form") is None


def test_every_time_the_search_and_the_run_tree_show_says_it_is_utc(
    store: agui_store.Store,
) -> None:
    store.append(one_run("trip", "r1", said("u1", "Book the Porto hotel", "user")))
    client = client_of(store)
    (hit,) = get(client, "/", q="porto").find_all(cls="hit")
    (found,) = store.search("porto")
    assert found.recorded_at is not None
    shown = hit.find(cls="time")
    assert shown is not None and shown.text == f"{found.recorded_at:%Y-%m-%d %H:%M:%S} UTC"
    headers = [th.text for th in get(client, "/thread", thread="trip").find_all(tag="th")]
    assert "recorded (UTC)" in headers


@pytest.mark.parametrize("lanes", ["[" * 5_000, "[" * 5_000 + "]" * 5_000, "{"])
def test_a_tree_page_whose_lanes_are_not_a_list_of_run_ids_is_refused_saying_so(
    store: agui_store.Store, lanes: str
) -> None:
    store.append(one_run("t", "r", said("u", "hello", "user")))
    response = client_of(store).get(url("/thread", thread="t", rows="1", lanes=lanes))
    assert response.status_code == 400
    message = parse(response.text).find("error-message")
    assert message is not None and "lanes= must be a JSON list" in message.text


def test_a_branch_write_whose_body_is_nested_past_what_json_decodes_is_refused_saying_so(
    store: agui_store.Store,
) -> None:
    store.append(one_run("t", "r", []))
    writer = client_of(store, allow_writes=True)
    response = writer.post(
        "/branch", content="[" * 5_000, headers={"Origin": "http://testserver"}
    )
    assert response.status_code == 400 and response.json() == {"error": "the body must be JSON"}
    assert [b.name for b in store.branches("t")] == ["main"]
